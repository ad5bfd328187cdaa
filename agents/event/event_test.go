package event

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestStateZeroAndOutOfRange(t *testing.T) {
	for st, want := range map[State]string{Unknown: "unknown", Failed: "failed", State(-1): "State(-1)", State(99): "State(99)"} {
		if got := st.String(); got != want {
			t.Errorf("State(%d).String() = %q, want %q", int(st), got, want)
		}
	}
	for _, st := range States() {
		b, _ := json.Marshal(st)
		var back State
		if err := json.Unmarshal(b, &back); err != nil || back != st {
			t.Errorf("round trip %v: %v %v", st, back, err)
		}
	}
	var s State
	if err := json.Unmarshal([]byte(`"sleeping"`), &s); err == nil || !strings.Contains(err.Error(), "sleeping") {
		t.Errorf("bad state: %v", err)
	}
}

// TestRegistryRoundTrip: every registered payload decodes back from its own JSON to an equal
// value, and a field of every payload is named in JSON (no Go-cased names on the wire).
func TestRegistryRoundTrip(t *testing.T) {
	seen := map[Type]bool{}
	for _, p := range Registered() {
		typ := p.EventType()
		if seen[typ] || !Known(typ) {
			t.Fatalf("%s registered twice or not known", typ)
		}
		seen[typ] = true
		v := reflect.New(reflect.TypeOf(p)).Elem()
		fill(v)
		b, err := json.Marshal(v.Interface())
		if err != nil {
			t.Fatal(err)
		}
		back, err := Decode(typ, b)
		if err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		if !reflect.DeepEqual(back, v.Interface()) {
			t.Errorf("%s: %+v != %+v", typ, back, v.Interface())
		}
		rt := reflect.TypeOf(p)
		for i := 0; i < rt.NumField(); i++ {
			if tag := rt.Field(i).Tag.Get("json"); tag == "" || tag == "-" {
				t.Errorf("%s.%s has no json name", rt.Name(), rt.Field(i).Name)
			}
		}
	}
	if _, err := Decode("no_such_event", nil); err == nil || !strings.Contains(err.Error(), "no_such_event") {
		t.Errorf("unknown type: %v", err)
	}
	if _, err := As[Checkpoint](TypeForked, []byte(`{}`)); err == nil {
		t.Error("As accepted the wrong type")
	}
}

// TestOldUsageCasing: logs written before the typed events spelled token usage in Go's field
// names; they still decode.
func TestOldUsageCasing(t *testing.T) {
	a, err := As[AssistantMessage](TypeAssistantMessage, []byte(`{"text":"hi","usage":{"InputTokens":3,"OutputTokens":4,"CostUSD":0.5,"Estimated":true}}`))
	if err != nil || a.Usage != (TokenUsage{InputTokens: 3, OutputTokens: 4, CostUSD: 0.5, Estimated: true}) {
		t.Errorf("got %+v %v", a, err)
	}
}

// fill sets every field of v to a non-zero value.
func fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Int, reflect.Int64:
		if v.Type() == reflect.TypeOf(State(0)) {
			v.SetInt(int64(Failed))
		} else {
			v.SetInt(7)
		}
	case reflect.Uint64:
		v.SetUint(9)
	case reflect.Float64:
		v.SetFloat(1.5)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem())
	case reflect.Slice:
		if v.Type() == reflect.TypeFor[json.RawMessage]() {
			v.SetBytes([]byte(`{"x":1}`))
			return
		}
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(s.Index(0))
		v.Set(s)
	case reflect.Struct:
		if v.Type().PkgPath() == "time" {
			return
		}
		for i := 0; i < v.NumField(); i++ {
			fill(v.Field(i))
		}
	}
}
