module github.com/gonetstack/gonet

go 1.26.8

require (
	github.com/gopacket/gopacket v1.7.7
	github.com/miekg/dns v1.1.73
	go.uber.org/goleak v1.3.0
	golang.org/x/sys v0.49.0
)

require golang.org/x/net v0.57.0 // indirect
