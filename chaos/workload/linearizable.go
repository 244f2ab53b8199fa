package workload

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/anishathalye/porcupine"
)

// kvInput and kvOutput are what the porcupine model sees of an operation.
type kvInput struct {
	Put   bool
	Key   string
	Value string
}

type kvOutput struct {
	Value string
	Found bool
	// Unknown marks a write whose outcome the client never learned.
	Unknown bool
}

// kvState is the value of one key (histories are partitioned by key).
type kvState struct {
	Value string
	Found bool
}

// KVModel is a register per key: a put sets it, a get must return the
// current value (or nothing before the first write).
var KVModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Input.(kvInput).Key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		slices.Sort(keys)
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() any { return kvState{} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(kvState), input.(kvInput), output.(kvOutput)
		if in.Put {
			return true, kvState{Value: in.Value, Found: true}
		}
		return out.Found == s.Found && out.Value == s.Value, s
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(kvInput), output.(kvOutput)
		switch {
		case in.Put && out.Unknown:
			return fmt.Sprintf("put(%s, %s) -> ?", in.Key, in.Value)
		case in.Put:
			return fmt.Sprintf("put(%s, %s)", in.Key, in.Value)
		case !out.Found:
			return fmt.Sprintf("get(%s) -> none", in.Key)
		default:
			return fmt.Sprintf("get(%s) -> %s", in.Key, out.Value)
		}
	},
	DescribeState: func(state any) string {
		s := state.(kvState)
		if !s.Found {
			return "none"
		}
		return s.Value
	},
}

// Operations turns the ledger into porcupine's history. Failed reads are
// left out (they observed nothing); an ambiguous write never returns, so
// porcupine may place it anywhere after its invocation, or after every
// other operation (as if it never happened).
func (l *Ledger) Operations() []porcupine.Operation {
	var ops []porcupine.Operation
	for _, op := range l.Ops {
		in := kvInput{Put: op.Kind == KindPut, Key: op.Key, Value: op.Value}
		switch {
		case op.Kind == KindGet && op.Outcome != OK:
			continue
		case op.Kind == KindGet:
			ops = append(ops, porcupine.Operation{ClientId: op.Client, Input: kvInput{Key: op.Key}, Call: op.Invoke,
				Output: kvOutput{Value: op.Value, Found: op.Found}, Return: op.Return})
		case op.Outcome == OK:
			ops = append(ops, porcupine.Operation{ClientId: op.Client, Input: in, Call: op.Invoke, Output: kvOutput{}, Return: op.Return})
		default:
			ops = append(ops, porcupine.Operation{ClientId: op.Client, Input: in, Call: op.Invoke, Output: kvOutput{Unknown: true}, Return: math.MaxInt64})
		}
	}
	return ops
}

// Linearizability is the verdict on a history.
type Linearizability struct {
	// Result is porcupine's: Ok, Illegal, or Unknown (the check ran out of
	// time, which proves nothing either way).
	Result porcupine.CheckResult `json:"result"`
	// Operations is how many operations were checked.
	Operations int `json:"operations"`
	// Took is how long the check ran.
	Took time.Duration `json:"took"`
	// Visualization and History are the files written when the history is
	// not proven linearizable.
	Visualization string `json:"visualization,omitempty"`
	History       string `json:"history,omitempty"`
	info          porcupine.LinearizationInfo
}

// CheckLinearizable checks the ledger against KVModel within timeout. When
// the result is not Ok and dir is not empty, it saves porcupine's HTML
// visualisation and the ledger as JSON there.
func (l *Ledger) CheckLinearizable(timeout time.Duration, dir string) (Linearizability, error) {
	ops := l.Operations()
	start := time.Now()
	res, info := porcupine.CheckOperationsVerbose(KVModel, ops, timeout)
	v := Linearizability{Result: res, Operations: len(ops), Took: time.Since(start), info: info}
	if res == porcupine.Ok || dir == "" {
		return v, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return v, err
	}
	v.Visualization = filepath.Join(dir, "linearizability.html")
	if err := porcupine.VisualizePath(KVModel, info, v.Visualization); err != nil {
		return v, fmt.Errorf("writing the visualisation: %w", err)
	}
	var err error
	v.History, err = l.Save(dir)
	return v, err
}

// Save writes the ledger as JSON (history.json) under dir.
func (l *Ledger) Save(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	b, err := json.MarshalIndent(l, "", " ")
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, "history.json")
	return p, os.WriteFile(p, b, 0o644)
}

func sortByReturn(ops []Op) {
	slices.SortFunc(ops, func(a, b Op) int {
		switch {
		case a.Return < b.Return:
			return -1
		case a.Return > b.Return:
			return 1
		}
		return 0
	})
}
