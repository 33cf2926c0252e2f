// Package docstest holds the test that keeps the Go in the repository's
// Markdown true: every ```go block of README.md, CHANGELOG.md and docs/*.md
// is compiled and vetted as a package of its own, and README's quotes of the
// example programs are checked against the files they quote. It has no
// code of its own.
package docstest
