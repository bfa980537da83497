package image

import (
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"runtime/debug"
	"strings"
)

// SBOM is an SPDX 2.3 document (JSON) of what a Go binary links, read from
// the build information the Go toolchain writes into it: the binary, its
// main module, each module it depends on (with its version, its go.sum
// hash and a purl) and the Go standard library of the toolchain that built
// it. It is made offline from the binary alone, and is the same for the
// same binary: no timestamp but the epoch the image uses, a namespace
// derived from the binary's sha256.
func SBOM(binary, name, version string) ([]byte, error) {
	data, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	info, err := buildinfo.ReadFile(binary)
	if err != nil {
		return nil, fmt.Errorf("%s: no Go build information: %w", binary, err)
	}
	return sbomOf(info, data, name, version)
}

type spdxDocument struct {
	SPDXVersion       string             `json:"spdxVersion"`
	DataLicense       string             `json:"dataLicense"`
	SPDXID            string             `json:"SPDXID"`
	Name              string             `json:"name"`
	DocumentNamespace string             `json:"documentNamespace"`
	CreationInfo      spdxCreationInfo   `json:"creationInfo"`
	Packages          []spdxPackage      `json:"packages"`
	Relationships     []spdxRelationship `json:"relationships"`
}

type spdxCreationInfo struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type spdxPackage struct {
	Name             string            `json:"name"`
	SPDXID           string            `json:"SPDXID"`
	VersionInfo      string            `json:"versionInfo,omitempty"`
	DownloadLocation string            `json:"downloadLocation"`
	FilesAnalyzed    bool              `json:"filesAnalyzed"`
	Checksums        []spdxChecksum    `json:"checksums,omitempty"`
	ExternalRefs     []spdxExternalRef `json:"externalRefs,omitempty"`
	Comment          string            `json:"comment,omitempty"`
}

type spdxChecksum struct {
	Algorithm     string `json:"algorithm"`
	ChecksumValue string `json:"checksumValue"`
}

type spdxExternalRef struct {
	ReferenceCategory string `json:"referenceCategory"`
	ReferenceType     string `json:"referenceType"`
	ReferenceLocator  string `json:"referenceLocator"`
}

type spdxRelationship struct {
	Element string `json:"spdxElementId"`
	Type    string `json:"relationshipType"`
	Related string `json:"relatedSpdxElement"`
}

// spdxIDUnsafe is what an SPDX identifier may not hold.
var spdxIDUnsafe = regexp.MustCompile(`[^A-Za-z0-9.-]`)

func spdxID(kind, name string) string {
	return "SPDXRef-" + kind + "-" + spdxIDUnsafe.ReplaceAllString(name, "-")
}

func goPackage(path, version, sum string) spdxPackage {
	p := spdxPackage{
		Name: path, SPDXID: spdxID("Module", path+"-"+version), VersionInfo: version,
		DownloadLocation: "NOASSERTION",
		ExternalRefs: []spdxExternalRef{{ReferenceCategory: "PACKAGE-MANAGER", ReferenceType: "purl",
			ReferenceLocator: "pkg:golang/" + path + "@" + version}},
	}
	if sum != "" {
		p.Comment = "go.sum hash " + sum
	}
	return p
}

func sbomOf(info *debug.BuildInfo, binary []byte, name, version string) ([]byte, error) {
	sum := sha256.Sum256(binary)
	digest := hex.EncodeToString(sum[:])
	binaryPkg := spdxPackage{
		Name: name, SPDXID: spdxID("Binary", name), VersionInfo: version, DownloadLocation: "NOASSERTION",
		Checksums: []spdxChecksum{{Algorithm: "SHA256", ChecksumValue: digest}},
	}
	doc := spdxDocument{
		SPDXVersion: "SPDX-2.3", DataLicense: "CC0-1.0", SPDXID: "SPDXRef-DOCUMENT",
		Name:              name + "-" + version,
		DocumentNamespace: "https://github.com/flotilla-sched/flotilla/spdx/" + name + "-" + version + "-" + digest,
		CreationInfo:      spdxCreationInfo{Created: epoch.UTC().Format("2006-01-02T15:04:05Z"), Creators: []string{"Tool: flotilla-image"}},
		Packages:          []spdxPackage{binaryPkg},
		Relationships:     []spdxRelationship{{"SPDXRef-DOCUMENT", "DESCRIBES", binaryPkg.SPDXID}},
	}
	goVersion := strings.TrimPrefix(info.GoVersion, "go")
	stdlib := spdxPackage{
		Name: "stdlib", SPDXID: spdxID("Module", "stdlib-"+goVersion), VersionInfo: goVersion, DownloadLocation: "https://go.dev/dl/",
		ExternalRefs: []spdxExternalRef{{ReferenceCategory: "PACKAGE-MANAGER", ReferenceType: "purl", ReferenceLocator: "pkg:golang/stdlib@" + goVersion}},
	}
	modules := []spdxPackage{goPackage(info.Main.Path, mainVersion(info.Main.Version, version), info.Main.Sum), stdlib}
	for _, dep := range info.Deps {
		if dep.Replace != nil { // what is linked is the replacement
			dep = dep.Replace
		}
		modules = append(modules, goPackage(dep.Path, dep.Version, dep.Sum))
	}
	seen := map[string]bool{}
	for _, m := range modules {
		if seen[m.SPDXID] {
			continue
		}
		seen[m.SPDXID] = true
		doc.Packages = append(doc.Packages, m)
		doc.Relationships = append(doc.Relationships, spdxRelationship{binaryPkg.SPDXID, "CONTAINS", m.SPDXID})
	}
	return json.MarshalIndent(doc, "", "  ")
}

// mainVersion is the main module's version: the release's, where the
// toolchain knows none ("(devel)" in a build from a checkout).
func mainVersion(recorded, release string) string {
	if recorded == "" || recorded == "(devel)" {
		return release
	}
	return recorded
}
