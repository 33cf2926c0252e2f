// Package jsonstyle writes Go values in shepherd's one JSON style, the
// style of the CLI's -json output and of the dashboard's JSON twins:
// snake_case keys; a duration is a number of milliseconds, to the
// microsecond (2.28), under a key ending in "_ms"; a time is an RFC 3339
// string in UTC ("2026-11-25T17:34:45.123Z"), or null when unset; a rate
// limit is {"n": 500, "per_ms": 1000, "burst": 10}, or null for none.
//
// The library's structs are written for Go: some have no JSON tags, some
// tags say "_ns" for a time.Duration, and their times are in the local
// zone. Value converts any of them to the style, so that a program prints
// the library's value as it is and a field added to it later is written
// in the style too. The library's own tags stay as they are.
package jsonstyle

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"reflect"
	"strings"
	"time"
	"unicode"
)

// Encode writes v in the style on one line, as json.Encoder does.
func Encode(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(Value(v))
}

// Value returns v as a value encoding/json writes in the style: structs
// become objects with their keys in field order, durations milliseconds,
// times UTC strings, rate limits objects (or null). []byte stays []byte
// (base64, as encoding/json writes it); a nil slice of anything else is
// an empty list.
func Value(v any) any { return style(reflect.ValueOf(v)) }

var (
	durationType = reflect.TypeOf(time.Duration(0))
	timeType     = reflect.TypeOf(time.Time{})
)

// rateLimit is what the style knows a rate limit by: queue.Rate is one.
// internal/ imports nothing above it, so the type is recognised by its
// methods and its N and Per fields (isRate) rather than named. Its Go
// zero value would read as a limit of 0 per 0ms, hence null; its burst
// is the one in effect (the default's value when Burst is 0).
type rateLimit interface {
	IsZero() bool
	EffectiveBurst() int
}

// isRate reports whether v is a rate limit: a struct with an int N and a
// time.Duration Per that has rateLimit's methods.
func isRate(v reflect.Value) bool {
	t := v.Type()
	if t.Kind() != reflect.Struct || !t.Implements(reflect.TypeOf((*rateLimit)(nil)).Elem()) {
		return false
	}
	n, okN := t.FieldByName("N")
	per, okPer := t.FieldByName("Per")
	return okN && okPer && n.Type.Kind() == reflect.Int && per.Type == durationType
}

// style is Value on a reflect.Value.
func style(v reflect.Value) any {
	if !v.IsValid() {
		return nil
	}
	switch v.Type() {
	case durationType:
		// Milliseconds to the microsecond: 30004.15, 0.42; a
		// nanosecond's digits are noise to anyone reading them.
		return math.Round(float64(v.Int())/float64(time.Microsecond)) / 1000
	case timeType:
		t := v.Interface().(time.Time)
		if t.IsZero() {
			return nil
		}
		return t.UTC().Format(time.RFC3339Nano)
	}
	if isRate(v) {
		r := v.Interface().(rateLimit)
		if r.IsZero() {
			return nil
		}
		return Object{{"n", v.FieldByName("N").Int()}, {"per_ms", style(v.FieldByName("Per"))}, {"burst", r.EffectiveBurst()}}
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return style(v.Elem())
	case reflect.Struct:
		return styleStruct(v)
	case reflect.Slice:
		if v.IsNil() && v.Type().Elem().Kind() != reflect.Uint8 {
			return []any{} // a list is a list, even an empty one
		}
		fallthrough
	case reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return v.Interface()
		}
		out := make([]any, v.Len())
		for i := range out {
			out[i] = style(v.Index(i))
		}
		return out
	case reflect.Map:
		out := make(map[string]any, v.Len())
		for it := v.MapRange(); it.Next(); {
			out[fmt.Sprint(it.Key().Interface())] = style(it.Value())
		}
		return out
	}
	return v.Interface()
}

// styleStruct converts a struct's exported fields, in their order. A
// field's key is its JSON tag's name, else its Go name in snake_case; a
// duration's key ends in "_ms" (replacing a tag's "_ns"). A tag's "-"
// and omitempty are honoured, a zero time counting as empty; an embedded
// struct's fields are promoted.
func styleStruct(v reflect.Value) any {
	t := v.Type()
	obj := make(Object, 0, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" && opts == "" {
			continue
		}
		fv := v.Field(i)
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			obj = append(obj, styleStruct(fv).(Object)...) // promoted, as encoding/json does
			continue
		}
		if strings.Contains(","+opts+",", ",omitempty,") && fv.IsZero() {
			continue
		}
		if name == "" {
			name = SnakeCase(f.Name)
		}
		if f.Type == durationType {
			name = strings.TrimSuffix(name, "_ns") + "_ms"
		}
		obj = append(obj, Field{name, style(fv)})
	}
	return obj
}

// SnakeCase turns a Go name into snake_case: InFlight is in_flight,
// WorkerTTL worker_ttl, PID pid, P50 p50.
func SnakeCase(s string) string {
	r := []rune(s)
	var b strings.Builder
	for i, c := range r {
		if unicode.IsUpper(c) && i > 0 {
			prevLower := unicode.IsLower(r[i-1]) || unicode.IsDigit(r[i-1])
			nextLower := i+1 < len(r) && unicode.IsLower(r[i+1])
			if prevLower || (unicode.IsUpper(r[i-1]) && nextLower) {
				b.WriteByte('_')
			}
		}
		b.WriteRune(unicode.ToLower(c))
	}
	return b.String()
}

// Field is one key of an Object.
type Field struct {
	Key   string
	Value any
}

// Object is a JSON object that keeps its keys in the order given (a map
// would sort them): a struct's field order.
type Object []Field

// MarshalJSON writes o's keys in order.
func (o Object) MarshalJSON() ([]byte, error) {
	var b strings.Builder
	b.WriteByte('{')
	for i, f := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(f.Key)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(f.Value)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return []byte(b.String()), nil
}
