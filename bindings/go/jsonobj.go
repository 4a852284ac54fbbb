package mcpgw

import (
	"bytes"
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"sync"
)

// The wire types keep the JSON object members this version does not know (the gateway echoes
// unknown spec fields, MCP servers add fields to their tools) in an Extra map, and write them
// back, so that a value marshals to the JSON it was decoded from.

// objectWriter writes a JSON object member by member, in order.
type objectWriter struct {
	buf  bytes.Buffer
	keys map[string]bool
	err  error
}

func newObject() *objectWriter {
	w := &objectWriter{keys: map[string]bool{}}
	w.buf.WriteByte('{')
	return w
}

// add writes key with v encoded by encoding/json.
func (w *objectWriter) add(key string, v any) {
	if w.err != nil {
		return
	}
	raw, err := json.Marshal(v)
	if err != nil {
		w.err = err
		return
	}
	w.addRaw(key, raw)
}

func (w *objectWriter) addRaw(key string, raw []byte) {
	if w.buf.Len() > 1 {
		w.buf.WriteByte(',')
	}
	k, _ := json.Marshal(key)
	w.buf.Write(k)
	w.buf.WriteByte(':')
	w.buf.Write(raw)
	w.keys[key] = true
}

// extra writes the members of extra that were not written yet, in key order.
func (w *objectWriter) extra(extra map[string]json.RawMessage) {
	keys := make([]string, 0, len(extra))
	for k := range extra {
		if !w.keys[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		w.addRaw(k, extra[k])
	}
}

func (w *objectWriter) bytes() ([]byte, error) {
	if w.err != nil {
		return nil, w.err
	}
	w.buf.WriteByte('}')
	return w.buf.Bytes(), nil
}

// marshalWithExtra writes plain (a struct type without JSON methods of its own) with the
// members of extra it lacks.
func marshalWithExtra(plain any, extra map[string]json.RawMessage) ([]byte, error) {
	b, err := json.Marshal(plain)
	if err != nil {
		return nil, err
	}
	return withExtra(b, extra)
}

// unmarshalWithExtra reads the JSON object data into *plain (a struct type without JSON methods
// of its own) and returns the members it has no field for, nil when there are none.
func unmarshalWithExtra[P any](data []byte, plain *P) (map[string]json.RawMessage, error) {
	if err := json.Unmarshal(data, plain); err != nil {
		return nil, err
	}
	return unknownMembers(data, reflect.TypeOf(*plain))
}

// withExtra appends the members of extra that obj (a JSON object) lacks.
func withExtra(obj []byte, extra map[string]json.RawMessage) ([]byte, error) {
	if len(extra) == 0 {
		return obj, nil
	}
	var present map[string]json.RawMessage
	if err := json.Unmarshal(obj, &present); err != nil {
		return nil, err
	}
	w := &objectWriter{keys: map[string]bool{}}
	w.buf.Write(obj[:len(obj)-1]) // without the closing brace
	for k := range present {
		w.keys[k] = true
	}
	w.extra(extra)
	return w.bytes()
}

var knownKeysCache sync.Map // reflect.Type -> map[string]bool

// knownKeys is the set of JSON member names the struct type t has fields for.
func knownKeys(t reflect.Type) map[string]bool {
	if k, ok := knownKeysCache.Load(t); ok {
		return k.(map[string]bool)
	}
	keys := map[string]bool{}
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			keys[name] = true
		}
	}
	knownKeysCache.Store(t, keys)
	return keys
}

// unknownMembers returns the members of the JSON object data that the struct type t has no
// field for, or nil when there are none.
func unknownMembers(data []byte, t reflect.Type) (map[string]json.RawMessage, error) {
	var all map[string]json.RawMessage
	if err := json.Unmarshal(data, &all); err != nil {
		return nil, err
	}
	known := knownKeys(t)
	var extra map[string]json.RawMessage
	for k, v := range all {
		if !known[k] {
			if extra == nil {
				extra = map[string]json.RawMessage{}
			}
			extra[k] = v
		}
	}
	return extra, nil
}
