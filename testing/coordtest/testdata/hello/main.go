// Command hello is the smallest main package, for the test of Build.
package main

func main() {}
