package limit

// ema is an exponential moving average over about window samples. Until it
// has seen window samples it is their plain mean, so that the first sample
// does not weigh as much as the whole window.
type ema struct {
	window int
	count  int
	value  float64
}

// add folds x in with the average's full weight.
func (e *ema) add(x float64) { e.addWeighted(x, 1) }

// addWeighted folds x in with the average's weight multiplied by damping in
// (0, 1]: a damped update moves the average less.
func (e *ema) addWeighted(x, damping float64) {
	if e.count < e.window {
		e.count++
		e.value += (x - e.value) / float64(e.count)
		return
	}
	e.value += damping * 2 / float64(e.window+1) * (x - e.value)
}
