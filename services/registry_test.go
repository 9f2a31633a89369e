package services

import (
	"slices"
	"strings"
	"testing"
)

func TestLookupParsesTheCommandLineList(t *testing.T) {
	tests := []struct {
		name      string
		list      string
		wantNames []string
		wantPorts []uint16
	}{
		{"one service", "echo", []string{"echo"}, []uint16{7}},
		{"iperf3", "iperf3", []string{"iperf3"}, []uint16{5201}},
		{"every service, in port order", "echo,discard,chargen,daytime,http",
			[]string{"echo", "discard", "daytime", "chargen", "http"}, []uint16{7, 9, 13, 19, 80}},
		{"spaces and case do not matter", " Daytime , ECHO ", []string{"echo", "daytime"}, []uint16{7, 13}},
		{"a name given twice is taken once", "chargen,chargen", []string{"chargen"}, []uint16{19}},
		{"an empty list gives no services", "", nil, nil},
		{"empty items are skipped", "echo,,", []string{"echo"}, []uint16{7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Lookup(tt.list)
			if err != nil {
				t.Fatalf("Lookup(%q): %v", tt.list, err)
			}
			var names []string
			var ports []uint16
			for _, s := range got {
				names = append(names, s.Name)
				ports = append(ports, s.Port)
			}
			if !slices.Equal(names, tt.wantNames) || !slices.Equal(ports, tt.wantPorts) {
				t.Errorf("Lookup(%q) = %v on ports %v, want %v on %v", tt.list, names, ports, tt.wantNames, tt.wantPorts)
			}
		})
	}
}

func TestLookupNamesEveryUnknownService(t *testing.T) {
	tests := []struct {
		name    string
		list    string
		mention []string
	}{
		{"one unknown", "echo,telnet", []string{`"telnet"`, "unknown service "}},
		{"two unknown", "ftp,echo,gopher", []string{`"ftp"`, `"gopher"`, "unknown services "}},
		{"the error lists the known names", "x", []string{"echo, discard, daytime, chargen, http"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Lookup(tt.list)
			if err == nil {
				t.Fatalf("Lookup(%q) = %v, want an error", tt.list, got)
			}
			for _, m := range tt.mention {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("Lookup(%q) error %q does not mention %s", tt.list, err, m)
				}
			}
		})
	}
}

func TestKnownServicesHaveTheirForms(t *testing.T) {
	for _, s := range Known() {
		if s.Name == "iperf3" {
			// TCP and UDP together on one port.
			if s.ServeBoth == nil || s.ServeUDP != nil || s.ServeTCP != nil {
				t.Errorf("iperf3: want ServeBoth alone")
			}
			continue
		}
		if wantUDP := s.Name != "http"; (s.ServeUDP != nil) != wantUDP {
			t.Errorf("%s: has UDP form %v, want %v", s.Name, s.ServeUDP != nil, wantUDP)
		}
		if s.ServeTCP == nil {
			t.Errorf("%s: has no TCP form", s.Name)
		}
		if s.ServeBoth != nil {
			t.Errorf("%s: has a ServeBoth", s.Name)
		}
	}
}
