// Command emptygo does nothing. bench/run.sh builds it static
// (CGO_ENABLED=0) and times its start-up: the cost of starting any Go
// program, the floor for a launcher written in Go.
package main

func main() {}
