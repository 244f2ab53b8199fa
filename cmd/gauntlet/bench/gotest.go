package bench

import (
	"fmt"
	"io"
	"strings"

	"golang.org/x/perf/benchfmt"
)

// Goals of Go benchmarks, by figure name, where the project has set one.
var goTestGoals = map[string]*Goal{}

// ParseGoTest reads `go test -bench` output with Go's own benchmark format
// reader and returns one figure per benchmark and unit: time per operation
// in µs, the rest (B/op, allocs/op, custom metrics such as
// schedules/min) as reported. A benchmark run several times (-count) gives
// the median.
func ParseGoTest(r io.Reader, fileName string) ([]Figure, error) {
	rd := benchfmt.NewReader(r, fileName)
	type key struct{ name, unit string }
	var order []key
	values := map[key][]float64{}
	for rd.Scan() {
		switch rec := rd.Result().(type) {
		case *benchfmt.SyntaxError:
			return nil, rec
		case *benchfmt.Result:
			name := goBenchName(rec)
			for _, v := range rec.Values {
				unit, val := v.OrigUnit, v.OrigValue
				if unit == "" {
					unit, val = v.Unit, v.Value
				}
				k := key{name, unit}
				if _, ok := values[k]; !ok {
					order = append(order, k)
				}
				values[k] = append(values[k], val)
			}
		}
	}
	if err := rd.Err(); err != nil {
		return nil, err
	}
	figs := make([]Figure, 0, len(order))
	for _, k := range order {
		val, unit := scaleUnit(median(values[k]), k.unit)
		name := fmt.Sprintf("%s %s", k.name, figureUnitName(k.unit))
		figs = append(figs, Figure{Name: name, Value: val, Unit: unit, Better: betterFor(k.unit), Goal: goTestGoals[name]})
	}
	return figs, nil
}

// goBenchName is the benchmark's name without the GOMAXPROCS suffix,
// prefixed by its package's last element.
func goBenchName(r *benchfmt.Result) string {
	name := string(r.Name.Full())
	if i := strings.LastIndexByte(name, '-'); i > 0 && strings.Trim(name[i+1:], "0123456789") == "" {
		name = name[:i]
	}
	name = "Benchmark" + name
	if pkg := r.GetConfig("pkg"); pkg != "" {
		name = pkg[strings.LastIndexByte(pkg, '/')+1:] + "." + name
	}
	return name
}

// figureUnitName names a figure by what it measures: time/op for ns/op,
// whose value is shown in µs.
func figureUnitName(unit string) string {
	if unit == "ns/op" {
		return "time/op"
	}
	return unit
}

// scaleUnit turns ns/op into µs, one unit for every run so that tables compare.
func scaleUnit(v float64, unit string) (float64, string) {
	if unit != "ns/op" {
		return v, unit
	}
	return v / 1e3, "µs/op"
}

// betterFor: rates (per minute, per second) are better higher; times,
// bytes, allocations and counts per operation lower.
func betterFor(unit string) Better {
	for _, rate := range []string{"/min", "/s", "/sec"} {
		if strings.HasSuffix(unit, rate) {
			return HigherIsBetter
		}
	}
	return LowerIsBetter
}

func median(vs []float64) float64 {
	s := append([]float64(nil), vs...)
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
