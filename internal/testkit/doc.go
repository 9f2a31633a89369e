// Package testkit holds nothing itself: its subpackages are GoNet's test
// harnesses, which only tests import. rawtest drives one stack through a
// raw wire with frames built and decoded by gopacket; stacktest joins two
// stacks in memory and makes the end-of-test checks; netnstest gives a test
// a network namespace of its own; logtest gives it a logger whose JSON
// events it reads back. The production packages of internal
// (deadline, logs, netns) sit beside testkit, never below it.
package testkit
