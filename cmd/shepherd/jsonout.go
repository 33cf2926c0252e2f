package main

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
	"time"
	"unicode"

	"github.com/shepherd-go/shepherd/queue"
)

// The CLI's JSON style, the same for every command's -json output and its
// errors: snake_case keys; a duration is a number of milliseconds (with a
// fraction: 2.28) under a key ending in "_ms"; a time is an RFC 3339
// string in UTC ("2026-11-25T17:34:45.123Z"), or null when unset.
//
// The library's structs are written for Go: some have no JSON tags, some
// tags say "_ns" for a time.Duration, and their times are in the local
// zone. printJSON converts any of them to the style, so that a command
// prints the library's value as it is and a field added to it later is
// printed in the style too. The library's own tags stay as they are: the
// dashboard's JSON twins use them.
//
// A queue.Rate is an object, {"n": 500, "per_ms": 1000, "burst": 10},
// with the burst in effect (the default's value when Burst is 0), or null
// for no limit: its Go zero value would read as a limit of 0 per 0ms.

// printJSON writes v in the CLI's JSON style on one line.
func printJSON(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(jsonStyle(reflect.ValueOf(v)))
}

// printJSONError writes err as {"error": "..."}, the error of a command
// run with -json.
func printJSONError(w io.Writer, err error) {
	_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
}

var (
	durationType = reflect.TypeOf(time.Duration(0))
	timeType     = reflect.TypeOf(time.Time{})
	rateType     = reflect.TypeOf(queue.Rate{})
)

// jsonStyle returns v as a value encoding/json writes in the CLI's style:
// structs become ordered objects, durations milliseconds, times UTC
// strings, rates objects (or null). []byte stays []byte (base64, as
// encoding/json writes it).
func jsonStyle(v reflect.Value) any {
	if !v.IsValid() {
		return nil
	}
	switch v.Type() {
	case durationType:
		return float64(v.Int()) / float64(time.Millisecond)
	case timeType:
		t := v.Interface().(time.Time)
		if t.IsZero() {
			return nil
		}
		return t.UTC().Format(time.RFC3339Nano)
	case rateType:
		r := v.Interface().(queue.Rate)
		if r.IsZero() {
			return nil
		}
		return orderedObject{{"n", r.N}, {"per_ms", jsonStyle(reflect.ValueOf(r.Per))}, {"burst", r.EffectiveBurst()}}
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return jsonStyle(v.Elem())
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
			out[i] = jsonStyle(v.Index(i))
		}
		return out
	case reflect.Map:
		out := make(map[string]any, v.Len())
		for it := v.MapRange(); it.Next(); {
			out[fmt.Sprint(it.Key().Interface())] = jsonStyle(it.Value())
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
	obj := make(orderedObject, 0, t.NumField())
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
			obj = append(obj, styleStruct(fv).(orderedObject)...) // promoted, as encoding/json does
			continue
		}
		if strings.Contains(","+opts+",", ",omitempty,") && fv.IsZero() {
			continue
		}
		if name == "" {
			name = snakeCase(f.Name)
		}
		if f.Type == durationType {
			name = strings.TrimSuffix(name, "_ns") + "_ms"
		}
		obj = append(obj, field{name, jsonStyle(fv)})
	}
	return obj
}

// snakeCase turns a Go name into snake_case: InFlight is in_flight,
// WorkerTTL worker_ttl, PID pid, P50 p50.
func snakeCase(s string) string {
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

// field is one key of an orderedObject.
type field struct {
	key   string
	value any
}

// orderedObject is a JSON object that keeps its keys in the struct's
// order (a map would sort them).
type orderedObject []field

func (o orderedObject) MarshalJSON() ([]byte, error) {
	var b strings.Builder
	b.WriteByte('{')
	for i, f := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(f.key)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(f.value)
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
