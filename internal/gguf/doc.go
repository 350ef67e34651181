// Package gguf reads the header of a GGUF model file: its metadata, its
// tensor directory and the ggml storage types those tensors use, checking
// every count and length against the file so a corrupt or hostile header fails
// with the file, the byte offset and the field named. It also writes GGUF
// (Encode) and builds the tiny real models rig's tests run (Tiny). It is the
// one GGUF reader: preflight sizes models from what it reads, runtimes reads
// chat templates and trained contexts through it. It never reads tensor data
// and does not judge whether a model fits anywhere (package preflight does).
package gguf
