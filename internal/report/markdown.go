// Package report writes benchmark tables into the repository's markdown.
package report

import (
	"fmt"
	"os"
	"strings"
)

// ReplaceSection rewrites the part of a markdown file between
// <!-- name:begin --> and <!-- name:end --> so that other sections stay.
func ReplaceSection(path, name, body string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	begin, end := "<!-- "+name+":begin -->\n", "<!-- "+name+":end -->"
	i, j := strings.Index(string(data), begin), strings.Index(string(data), end)
	if i < 0 || j < i {
		return fmt.Errorf("%s has no %s section markers", path, name)
	}
	out := string(data[:i+len(begin)]) + body + string(data[j:])
	return os.WriteFile(path, []byte(out), 0o644)
}
