// Reads ribshard's birdwatcher API the way Alice-LG's birdwatcher source (type
// single_table) does, and prints what a looking glass would show, as JSON, for the Rust
// test (crates/daemon/tests/looking_glass.rs) to check.
//
// Alice-LG itself cannot be fetched here (the Go module proxy refuses it), so this follows
// its pkg/sources/birdwatcher reads step by step, written anew: the envelope's "api" and
// "ttl", /status, /protocols/bgp and /protocols/short?uncached=true, then per neighbor
// /routes/protocol, /routes/filtered and /routes/noexport decoded as a token stream, with
// the same type assertions (a wrong type panics there, and here), the same time layouts an
// operator configures, and the same de-duplication of received against filtered routes.
// Where Alice-LG quietly falls back (a time that does not parse), this fails instead.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"time"
)

// The layouts docs/OPERATIONS.md tells an operator to give Alice-LG.
const (
	serverTime      = "2006-01-02T15:04:05.999999999Z07:00"
	serverTimeShort = "2006-01-02T15:04:05.999999999Z07:00"
	serverTimeExt   = "2006-01-02T15:04:05.999999999Z07:00"
)

var api string

func fail(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "alice: "+format+"\n", a...)
	os.Exit(1)
}

func get(path string) *http.Response {
	res, err := http.Get(api + path)
	if err != nil {
		fail("GET %s: %v", path, err)
	}
	if res.StatusCode != 200 {
		b, _ := io.ReadAll(res.Body)
		fail("GET %s: %d %s", path, res.StatusCode, b)
	}
	return res
}

func getJSON(path string) map[string]any {
	res := get(path)
	defer res.Body.Close()
	out := map[string]any{}
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		fail("GET %s: %v", path, err)
	}
	return out
}

func parseTime(v any, layout, what string) time.Time {
	s, ok := v.(string)
	if !ok {
		fail("%s: not a string: %v", what, v)
	}
	t, err := time.ParseInLocation(layout, s, time.UTC)
	if err != nil {
		fail("%s: %v", what, err)
	}
	return t.UTC()
}

// The envelope every reply carries (Alice-LG's parseAPIStatus and parseCacheStatus).
func apiStatus(bird map[string]any, what string) {
	a, ok := bird["api"].(map[string]any)
	if !ok {
		fail("%s: no api: %v", what, bird["error"])
	}
	_ = a["Version"].(string)
	_ = a["result_from_cache"].(bool)
	cache := a["cache_status"].(map[string]any)
	at := cache["cached_at"].(map[string]any)
	parseTime(at["date"], serverTime, what+" cached_at")
	parseTime(bird["ttl"], serverTime, what+" ttl")
}

func str(v any, fallback string) string {
	s, ok := v.(string)
	if !ok {
		return fallback
	}
	return s
}

func num(v any, fallback int) int {
	f, ok := v.(float64)
	if !ok {
		return fallback
	}
	return int(f)
}

type Neighbor struct {
	ID        string `json:"id"`
	Address   string `json:"address"`
	ASN       int    `json:"asn"`
	State     string `json:"state"`
	Received  int    `json:"received"`
	Accepted  int    `json:"accepted"`
	Filtered  int    `json:"filtered"`
	Exported  int    `json:"exported"`
	Preferred int    `json:"preferred"`
	UptimeSec int    `json:"uptime_seconds"`
	Channels  int    `json:"channels"`
}

type Route struct {
	Network     string     `json:"network"`
	Neighbor    string     `json:"neighbor"`
	Gateway     string     `json:"gateway"`
	LearntFrom  string     `json:"learnt_from"`
	Primary     bool       `json:"primary"`
	AgeSeconds  int        `json:"age_seconds"`
	Origin      string     `json:"origin"`
	AsPath      []int      `json:"as_path"`
	NextHop     string     `json:"next_hop"`
	LocalPref   int        `json:"local_pref"`
	Med         int        `json:"med"`
	Communities [][]int    `json:"communities"`
	Large       [][]int    `json:"large_communities"`
	Ext         [][]string `json:"ext_communities"`
}

func communities(v any) [][]int {
	out := [][]int{}
	l, ok := v.([]any)
	if !ok {
		return out
	}
	for _, c := range l {
		one := []int{}
		for _, x := range c.([]any) {
			one = append(one, int(x.(float64)))
		}
		out = append(out, one)
	}
	return out
}

// Alice-LG's parseRouteData and parseRouteBgpInfo.
func route(r map[string]any) Route {
	age := parseTime(r["age"], serverTimeShort, "route age")
	bgp, ok := r["bgp"].(map[string]any)
	if !ok {
		fail("route without bgp: %v", r)
	}
	path := []int{}
	if l, ok := bgp["as_path"].([]any); ok {
		for _, e := range l {
			if s, ok := e.(string); ok {
				if n, err := strconv.Atoi(s); err == nil {
					path = append(path, n)
				}
			}
		}
	}
	ext := [][]string{}
	if l, ok := bgp["ext_communities"].([]any); ok {
		for _, c := range l {
			t := c.([]any)
			if len(t) != 3 {
				fail("malformed ext community %v", t)
			}
			ext = append(ext, []string{str(t[0], "?"), t[1].(string), t[2].(string)})
		}
	}
	lp, _ := strconv.Atoi(str(bgp["local_pref"], "0"))
	med, _ := strconv.Atoi(str(bgp["med"], "0"))
	gateway := str(r["gateway"], "unknown gateway")
	learnt := str(r["learnt_from"], "")
	if learnt == "" {
		learnt = gateway
	}
	return Route{
		Network:     str(r["network"], "unknown net"),
		Neighbor:    str(r["from_protocol"], "unknown neighbor"),
		Gateway:     gateway,
		LearntFrom:  learnt,
		Primary:     r["primary"].(bool),
		AgeSeconds:  int(time.Since(age).Seconds()),
		Origin:      str(bgp["origin"], "unknown"),
		AsPath:      path,
		NextHop:     str(bgp["next_hop"], "unknown"),
		LocalPref:   lp,
		Med:         med,
		Communities: communities(bgp["communities"]),
		Large:       communities(bgp["large_communities"]),
		Ext:         ext,
	}
}

// Alice-LG's parseRoutesResponseStream: tokens until "api", "ttl" and "routes".
func routes(path string) []Route {
	res := get(path)
	defer res.Body.Close()
	dec := json.NewDecoder(res.Body)
	out := []Route{}
	sawAPI := false
	for {
		t, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			fail("%s: %v", path, err)
		}
		switch t {
		case "api":
			a := map[string]any{}
			if err := dec.Decode(&a); err != nil {
				fail("%s: %v", path, err)
			}
			_ = a["Version"].(string)
			_ = a["result_from_cache"].(bool)
			sawAPI = true
		case "ttl":
			var s string
			if err := dec.Decode(&s); err != nil {
				fail("%s: %v", path, err)
			}
			parseTime(s, serverTime, path+" ttl")
		case "routes":
			if _, err := dec.Token(); err != nil {
				fail("%s: %v", path, err)
			}
			for dec.More() {
				r := map[string]any{}
				if err := dec.Decode(&r); err != nil {
					fail("%s: %v", path, err)
				}
				out = append(out, route(r))
			}
		}
	}
	if !sawAPI {
		fail("%s: no api in the reply", path)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Network < out[j].Network })
	return out
}

func main() {
	if len(os.Args) != 2 {
		fail("usage: alice http://ADDRESS:PORT/birdwatcher")
	}
	api = os.Args[1]
	result := map[string]any{}

	st := getJSON("/status")
	apiStatus(st, "/status")
	s := st["status"].(map[string]any)
	parseTime(s["current_server"], serverTimeShort, "current_server")
	parseTime(s["last_reboot"], serverTimeShort, "last_reboot")
	parseTime(s["last_reconfig"], serverTimeExt, "last_reconfig")
	result["status"] = map[string]string{
		"version":   str(s["version"], "unknown"),
		"router_id": str(s["router_id"], "unknown"),
		"message":   str(s["message"], "unknown"),
	}

	// Alice-LG's parseNeighbors.
	pb := getJSON("/protocols/bgp")
	apiStatus(pb, "/protocols/bgp")
	neighbors := []Neighbor{}
	for id, p := range pb["protocols"].(map[string]any) {
		proto := p.(map[string]any)
		r := proto["routes"].(map[string]any)
		since := parseTime(proto["state_changed"], serverTimeShort, id+" state_changed")
		received := r["imported"].(float64) + r["filtered"].(float64)
		channels := 0
		if c, ok := proto["channels"].(map[string]any); ok {
			for _, ch := range c {
				if rc, ok := ch.(map[string]any)["routes_count"].(map[string]any); ok && len(rc) > 0 {
					channels++
				}
			}
		}
		neighbors = append(neighbors, Neighbor{
			ID:        id,
			Address:   str(proto["neighbor_address"], "error"),
			ASN:       num(proto["neighbor_as"], 0),
			State:     str(proto["state"], "unknown"),
			Received:  int(received),
			Accepted:  num(r["imported"], 0),
			Filtered:  num(r["filtered"], 0),
			Exported:  num(r["exported"], 0),
			Preferred: num(r["preferred"], 0),
			UptimeSec: int(time.Since(since).Seconds()),
			Channels:  channels,
		})
	}
	sort.Slice(neighbors, func(i, j int) bool { return neighbors[i].ID < neighbors[j].ID })
	result["neighbors"] = neighbors

	// Alice-LG's parseNeighborsShort.
	ps := getJSON("/protocols/short?uncached=true")
	apiStatus(ps, "/protocols/short")
	short := map[string]string{}
	for id, p := range ps["protocols"].(map[string]any) {
		proto := p.(map[string]any)
		parseTime(proto["since"], serverTimeShort, id+" since")
		short[id] = str(proto["state"], "unknown")
	}
	result["short"] = short

	// Alice-LG's fetchRequiredRoutes and RoutesNotExported, per neighbor.
	perNeighbor := map[string]any{}
	for _, n := range neighbors {
		received := routes("/routes/protocol/" + n.ID)
		filtered := routes("/routes/filtered/" + n.ID)
		imported := received
		if len(received) > 0 {
			peer, learnt := received[0].Gateway, received[0].LearntFrom
			keep := []Route{}
			for _, f := range filtered {
				if f.Gateway == peer || f.Gateway == learnt || f.LearntFrom == peer {
					keep = append(keep, f)
				}
			}
			filtered = keep
			drop := map[string]bool{}
			for _, f := range filtered {
				drop[f.Network] = true
			}
			imported = []Route{}
			for _, r := range received {
				if !drop[r.Network] {
					imported = append(imported, r)
				}
			}
		}
		perNeighbor[n.ID] = map[string]any{
			"imported":     imported,
			"filtered":     filtered,
			"not_exported": routes("/routes/noexport/" + n.ID),
		}
	}
	result["routes"] = perNeighbor
	if err := json.NewEncoder(os.Stdout).Encode(result); err != nil {
		fail("%v", err)
	}
}
