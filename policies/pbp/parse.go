package pbp

// Parse reads one YAML file as the loader does, without a Go type: the strict decode refuses
// anchors, aliases and tags (on keys too), duplicate and non-string keys, floats, integers
// outside ±2^53, several documents and lone carriage returns, with an *Error naming file:line.
// value is the generic JSON value (map[string]any / []any / string / int64 / bool / nil); line
// maps a dotted field path such as "layers[0].id" to its line, or its nearest parent's.
func Parse(file string, data []byte) (value any, line func(field string) int, err error) {
	var v any
	d, err := decodeStrict(file, data, &v)
	if err != nil {
		return nil, nil, err
	}
	return d.value, func(field string) int { return d.errAt(field, "").Line }, nil
}
