package jsonfield

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

type when struct{}

func (*when) DescribeJSON() string { return "a date" }

func TestTypeError(t *testing.T) {
	type inner struct {
		Tags []string `json:"tags"`
		At   *when    `json:"at"`
	}
	type Embedded struct {
		Count uint `json:"count"`
	}
	type body struct {
		Embedded
		Name  string  `json:"name"`
		Ratio float64 `json:"ratio"`
		Inner inner   `json:"inner"`
		Any   any     `json:"any"`
	}
	for _, tt := range []struct{ in, want string }{
		{`{"name":1}`, "name must be a string, not a number"},
		{`{"count":-1}`, "count must be a whole number, 0 or more, not -1"},
		{`{"ratio":"x"}`, `ratio must be a number, not a string`},
		{`{"inner":{"tags":{}}}`, "inner.tags must be an array of strings, not an object"},
		{`{"inner":{"tags":[null,2]}}`, "inner.tags must be an array of strings: an item is a number"},
		{`{"inner":[]}`, "inner must be an object, not an array"},
	} {
		var b body
		got, ok := TypeError(&b, json.Unmarshal([]byte(tt.in), &b))
		if !ok || got != tt.want {
			t.Errorf("%s: %q, %v; want %q", tt.in, got, ok, tt.want)
		}
	}
	var b body
	if _, ok := TypeError(&b, json.Unmarshal([]byte(`[1]`), &b)); ok {
		t.Error("a type error of the whole value has a field")
	}
	if _, ok := TypeError(&b, errors.New("other")); ok {
		t.Error("another error is a type error")
	}
	if d := Describe(reflect.TypeFor[when]()); d != "a date" {
		t.Errorf("a Describer: %q", d)
	}
	for in, want := range map[string]string{`"x"`: `"x"`, `5`: "a number", `{}`: "an object", `[]`: "an array", `true`: "true or false", `null`: "a null"} {
		if got := Words(Given([]byte(in))); got != want {
			t.Errorf("Words(Given(%s)) = %q, want %q", in, got, want)
		}
	}
}
