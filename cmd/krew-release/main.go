// Command krew-release builds kubectl-flotilla for every platform krew
// installs it on, packs each build with the LICENSE into the archive a
// GitHub release of the version publishes, and writes the krew plugin
// manifest (flotilla.yaml, for a pull request to kubernetes-sigs/krew-index)
// naming each archive's URL and sha256. `make krew VERSION=v0.3.0` runs it
// into dist/.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/flotilla-sched/flotilla/manifests/krew"
)

func main() {
	version := flag.String("version", "", "the release, vMAJOR.MINOR.PATCH (its tag)")
	out := flag.String("out", "dist", "where the archives and flotilla.yaml go")
	ldflags := flag.String("ldflags", "-s -w", "the builds' -ldflags")
	flag.Parse()
	if err := run(*version, *out, *ldflags); err != nil {
		fmt.Fprintln(os.Stderr, "krew-release:", err)
		os.Exit(1)
	}
}

func run(version, out, ldflags string) error {
	if version == "" {
		return fmt.Errorf("-version is required")
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	build, err := os.MkdirTemp("", "krew-release")
	if err != nil {
		return err
	}
	defer os.RemoveAll(build)
	var released []krew.Released
	for _, p := range krew.Platforms {
		binary := filepath.Join(build, p.OS+"-"+p.Arch, p.Binary())
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", ldflags, "-o", binary, "./cmd/kubectl-flotilla")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Arch)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("building for %s/%s: %w", p.OS, p.Arch, err)
		}
		path, digest, err := krew.Archive(out, p, binary, "LICENSE")
		if err != nil {
			return err
		}
		fmt.Printf("%s  %s\n", digest, path)
		released = append(released, krew.Released{Platform: p, URI: krew.ReleaseURL(version, p), Sha256: digest})
	}
	manifest, err := krew.Manifest(version, released)
	if err != nil {
		return err
	}
	path := filepath.Join(out, krew.PluginName+".yaml")
	fmt.Println(path)
	return os.WriteFile(path, manifest, 0o644)
}
