package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/sharness-ai/sharness/policies/schema"
)

// validateSchema checks the manifest at manifestPath, then every layer file it names, against
// the PBP schema (policies/schema): shape only, not hashes or the design's rules, which loading
// the manifest checks next. The first failure is returned as one line naming the file. Layer
// files are read only once the manifest is valid, so their paths are known to be relative and
// to stay inside the manifest's folder.
func validateSchema(manifestPath string) error {
	data, err := os.ReadFile(manifestPath)
	if err != nil {
		return oneLine("%s: cannot read: %v", manifestPath, unwrapPathErr(err))
	}
	if err := validateAs(manifestPath, data, "manifest"); err != nil {
		return err
	}
	var md struct {
		Layers []struct {
			File string `yaml:"file"`
		} `yaml:"layers"`
	}
	if err := yaml.Unmarshal(data, &md); err != nil { // not reached: the schema accepted it
		return oneLine("%s: %v", manifestPath, err)
	}
	dir := filepath.Dir(manifestPath)
	for _, l := range md.Layers {
		name := filepath.Join(dir, filepath.FromSlash(l.File))
		data, err := os.ReadFile(name)
		if err != nil {
			return oneLine("%s: cannot read: %v", name, unwrapPathErr(err))
		}
		if err := validateAs(name, data, "layer"); err != nil {
			return err
		}
	}
	return nil
}

// validateAs checks one file against the schema as a document of kind want. A document of the
// other kind is named as such rather than reported by the fields it lacks.
func validateAs(name string, data []byte, want string) error {
	var head struct {
		Kind any `yaml:"kind"`
	}
	if yaml.Unmarshal(data, &head) == nil {
		if k, ok := head.Kind.(string); ok && k != want && (k == "manifest" || k == "layer") {
			return oneLine("%s: /kind: is %q, want %q", name, k, want)
		}
	}
	return schema.Validate(name, data)
}

// oneLine formats an error that stays on one line whatever the file name holds.
func oneLine(format string, args ...any) error {
	return errors.New(strings.NewReplacer("\n", `\n`, "\r", `\r`).Replace(fmt.Sprintf(format, args...)))
}

// unwrapPathErr drops os.PathError's own copy of the path, which the message already names.
func unwrapPathErr(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
