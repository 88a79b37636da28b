// Regenerates tests/jsonschema-cases.json: every case's document validated by the real
// gojsonschema v1.2.0 (Debian: golang-go, golang-github-xeipuuv-gojsonschema-dev), as EMCO's
// validation.ValidateJsonSchemaData calls it. Go visits sibling properties in map order, so
// each case runs 40 times and every distinct answer is kept.
//
//	GOPATH=/usr/share/gocode GO111MODULE=off go run main.go < cases.json > ../../tests/jsonschema-cases.json
package main

import (
	"encoding/json"
	"os"
	"sort"

	"github.com/xeipuuv/gojsonschema"
)

type input struct {
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema"`
	Doc    json.RawMessage `json:"doc"`
}

type output struct {
	Name    string          `json:"name"`
	Schema  json.RawMessage `json:"schema"`
	Doc     json.RawMessage `json:"doc"`
	Answers [][]string      `json:"answers"`
}

func main() {
	var cases []input
	if err := json.NewDecoder(os.Stdin).Decode(&cases); err != nil {
		panic(err)
	}
	var out []output
	for _, c := range cases {
		seen := map[string][]string{}
		for i := 0; i < 40; i++ {
			s, err := gojsonschema.NewSchema(gojsonschema.NewStringLoader(string(c.Schema)))
			if err != nil {
				panic(c.Name + ": " + err.Error())
			}
			r, err := s.Validate(gojsonschema.NewStringLoader(string(c.Doc)))
			if err != nil {
				panic(c.Name + ": " + err.Error())
			}
			answer := []string{}
			for _, e := range r.Errors() {
				answer = append(answer, e.Description())
			}
			key, _ := json.Marshal(answer)
			seen[string(key)] = answer
		}
		keys := []string{}
		for k := range seen {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		o := output{Name: c.Name, Schema: c.Schema, Doc: c.Doc}
		for _, k := range keys {
			o.Answers = append(o.Answers, seen[k])
		}
		out = append(out, o)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", " ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		panic(err)
	}
}
