// Package clientgen is the generator of per-API client packages behind the
// tollgate-gen command ([Run] is the command), for Go, JavaScript/TypeScript, Python,
// .NET, Java, PHP and Dart: one package per API of a catalog, each with the same
// two-step shape (construct with a key, then execute the call), typed parameters and
// results, the catalog's validation rules, a README with an example and a semver
// version.
//
// [Examples] renders the example call of each language's README for one API, with the
// package names the command's flags would give: the web dashboard shows them, so that
// what a person copies from it is what the generated package's README says.
package clientgen
