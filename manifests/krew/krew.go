// Package krew packages kubectl-flotilla for krew, kubectl's plugin
// manager: one archive per platform (the binary and the LICENSE) and the
// plugin manifest that krew-index takes, whose every platform names its
// archive's URL and sha256.
package krew

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// PluginName is the name users install: kubectl krew install flotilla.
const PluginName = "flotilla"

// Platforms are the OS/architecture pairs released, as GOOS/GOARCH.
var Platforms = []Platform{
	{OS: "linux", Arch: "amd64"}, {OS: "linux", Arch: "arm64"},
	{OS: "darwin", Arch: "amd64"}, {OS: "darwin", Arch: "arm64"},
	{OS: "windows", Arch: "amd64"},
}

// Platform is one released OS/architecture.
type Platform struct{ OS, Arch string }

// Binary is the plugin's executable name on the platform.
func (p Platform) Binary() string {
	if p.OS == "windows" {
		return "kubectl-flotilla.exe"
	}
	return "kubectl-flotilla"
}

// ArchiveName is the platform's release archive.
func (p Platform) ArchiveName() string {
	return fmt.Sprintf("kubectl-flotilla_%s_%s.tar.gz", p.OS, p.Arch)
}

// Released is a platform's archive as published: where, and its digest.
type Released struct {
	Platform
	URI    string
	Sha256 string
}

// Plugin is krew's plugin manifest (krew.googlecontainertools.github.com
// v1alpha2 Plugin; the fields krew-index validates).
type Plugin struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       PluginSpec        `json:"spec"`
}

// PluginSpec is a Plugin's spec.
type PluginSpec struct {
	Version          string           `json:"version"`
	Homepage         string           `json:"homepage"`
	ShortDescription string           `json:"shortDescription"`
	Description      string           `json:"description"`
	Platforms        []PluginPlatform `json:"platforms"`
}

// PluginPlatform is one platform of a Plugin.
type PluginPlatform struct {
	Selector *metav1.LabelSelector `json:"selector"`
	URI      string                `json:"uri"`
	Sha256   string                `json:"sha256"`
	Files    []FileOperation       `json:"files"`
	Bin      string                `json:"bin"`
}

// FileOperation copies a file out of the archive.
type FileOperation struct {
	From string `json:"from"`
	To   string `json:"to"`
}

const (
	apiVersion = "krew.googlecontainertools.github.com/v1alpha2"
	homepage   = "https://github.com/flotilla-sched/flotilla"
)

// ReleaseURL is where a release's archive of the platform is published.
func ReleaseURL(version string, p Platform) string {
	return fmt.Sprintf("%s/releases/download/%s/%s", homepage, version, p.ArchiveName())
}

// Manifest renders the plugin manifest of version (vMAJOR.MINOR.PATCH) for
// the released archives, and checks it as krew-index does.
func Manifest(version string, released []Released) ([]byte, error) {
	p := Plugin{
		APIVersion: apiVersion, Kind: "Plugin",
		Metadata: metav1.ObjectMeta{Name: PluginName},
		Spec: PluginSpec{
			Version:          version,
			Homepage:         homepage,
			ShortDescription: "Why pods wait in flotilla's queues and gangs",
			Description: "Reads what the flotilla scheduler says of its queues, gangs and pods:\n" +
				"  kubectl flotilla queues              the queue tree: weight, guarantee, capability, deserved, allocated, pending\n" +
				"  kubectl flotilla pending -A          pending gangs and pods per queue, in the scheduler's order\n" +
				"  kubectl flotilla why job NAME -n NS  the reason, the shortfall, placed members, last events\n",
		},
	}
	for _, r := range released {
		p.Spec.Platforms = append(p.Spec.Platforms, PluginPlatform{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"os": r.OS, "arch": r.Arch}},
			URI:      r.URI, Sha256: r.Sha256,
			Files: files(r.Platform),
			Bin:   r.Binary(),
		})
	}
	if err := Validate(p); err != nil {
		return nil, err
	}
	return yaml.Marshal(p)
}

// files are what krew installs from a platform's archive.
func files(p Platform) []FileOperation {
	out := []FileOperation{{From: p.Binary(), To: "."}, {From: "LICENSE", To: "."}}
	if p.OS != "windows" {
		out = append(out, FileOperation{From: CompletionScript, To: "."})
	}
	return out
}

var (
	semverPattern = regexp.MustCompile(`^v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`)
	sha256Pattern = regexp.MustCompile(`^[a-f0-9]{64}$`)
)

// Validate applies krew-index's rules for a plugin manifest: apiVersion
// and kind, a safe name, a one-line short description, a semver version
// with its v, and for every platform a URI, a sha256, a bin, files that
// say from and to, and a selector on os and arch only; no two platforms
// with the same selector.
func Validate(p Plugin) error {
	switch {
	case p.APIVersion != apiVersion:
		return fmt.Errorf("apiVersion %q, want %q", p.APIVersion, apiVersion)
	case p.Kind != "Plugin":
		return fmt.Errorf("kind %q, want Plugin", p.Kind)
	case !regexp.MustCompile(`^[\w-]+$`).MatchString(p.Metadata.Name):
		return fmt.Errorf("metadata.name %q is not a safe plugin name", p.Metadata.Name)
	case p.Spec.ShortDescription == "" || strings.ContainsAny(p.Spec.ShortDescription, "\r\n"):
		return fmt.Errorf("spec.shortDescription must be one non-empty line")
	case !semverPattern.MatchString(p.Spec.Version):
		return fmt.Errorf("spec.version %q is not vMAJOR.MINOR.PATCH", p.Spec.Version)
	case len(p.Spec.Platforms) == 0:
		return fmt.Errorf("spec.platforms is empty")
	}
	seen := map[string]bool{}
	for i, pl := range p.Spec.Platforms {
		field := fmt.Sprintf("spec.platforms[%d]", i)
		switch {
		case !strings.HasPrefix(pl.URI, "https://"):
			return fmt.Errorf("%s.uri %q is not https", field, pl.URI)
		case !sha256Pattern.MatchString(pl.Sha256):
			return fmt.Errorf("%s.sha256 %q is not a sha256 digest", field, pl.Sha256)
		case pl.Bin == "":
			return fmt.Errorf("%s.bin is empty", field)
		case pl.Selector == nil || len(pl.Selector.MatchLabels) == 0:
			return fmt.Errorf("%s.selector is empty", field)
		}
		for _, f := range pl.Files {
			if f.From == "" || f.To == "" {
				return fmt.Errorf("%s.files: from and to must both be set", field)
			}
		}
		for key := range pl.Selector.MatchLabels {
			if key != "os" && key != "arch" {
				return fmt.Errorf("%s.selector: key %q, krew selects on os and arch only", field, key)
			}
		}
		selector := metav1.FormatLabelSelector(pl.Selector)
		if seen[selector] {
			return fmt.Errorf("%s.selector %s repeats an earlier platform's", field, selector)
		}
		seen[selector] = true
	}
	return nil
}

// CompletionScript is the name and text of the script through which
// kubectl (1.26 and later) completes `kubectl flotilla` arguments: it runs
// kubectl_complete-<plugin> from PATH, which asks the plugin's own
// __complete command. Krew links only the plugin's binary into PATH; the
// README says how to link this script beside it.
const (
	CompletionScript     = "kubectl_complete-flotilla"
	completionScriptText = `#!/usr/bin/env sh
# kubectl completes "kubectl flotilla ..." through this script: link it
# into PATH beside kubectl-flotilla.
exec kubectl-flotilla __complete "$@"
`
)

// Archive writes the platform's archive into dir: the binary built at
// binary and the LICENSE at license, at the archive's root, as the
// manifest's files name them. It returns the archive's path and sha256.
func Archive(dir string, p Platform, binary, license string) (string, string, error) {
	path := filepath.Join(dir, p.ArchiveName())
	f, err := os.Create(path)
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	digest := sha256.New()
	gz := gzip.NewWriter(io.MultiWriter(f, digest))
	tw := tar.NewWriter(gz)
	// In a fixed order, with no times: the same inputs give the same
	// digest.
	for _, file := range []struct {
		name, src string
		mode      int64
	}{{p.Binary(), binary, 0o755}, {"LICENSE", license, 0o644}} {
		if err := addFile(tw, file.name, file.src, file.mode); err != nil {
			return "", "", err
		}
	}
	if p.OS != "windows" { // a shell script: kubectl on Windows runs no .sh
		if err := addBytes(tw, CompletionScript, []byte(completionScriptText), 0o755); err != nil {
			return "", "", err
		}
	}
	if err := tw.Close(); err != nil {
		return "", "", err
	}
	if err := gz.Close(); err != nil {
		return "", "", err
	}
	return path, hex.EncodeToString(digest.Sum(nil)), f.Close()
}

func addFile(tw *tar.Writer, name, src string, mode int64) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return addBytes(tw, name, data, mode)
}

func addBytes(tw *tar.Writer, name string, data []byte, mode int64) error {
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}
