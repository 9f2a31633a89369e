module github.com/gonetstack/gonet

go 1.26.8

require (
	github.com/gopacket/gopacket v1.7.7
	github.com/insomniacslk/dhcp v0.0.0-20260901064844-234b97448fae
	github.com/miekg/dns v1.1.73
	github.com/prometheus/client_model v0.6.3
	github.com/prometheus/common v0.73.1
	go.uber.org/goleak v1.3.0
	golang.org/x/sys v0.49.0
)

require (
	github.com/josharian/native v1.1.0 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/pandatix/go-abnf v0.5.3 // indirect
	github.com/pierrec/lz4/v4 v4.1.14 // indirect
	github.com/u-root/uio v0.0.0-20230220225925-ffce2a382923 // indirect
	golang.org/x/net v0.61.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)
