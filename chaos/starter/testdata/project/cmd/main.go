package main

// The manager of the test project: gauntlet init finds it here.
func main() {}
