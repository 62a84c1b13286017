package bloomguard

// Every vector in tests/vectors/*.json, through the binding: Redisson's hashes and indexes, its
// sizing (with the rows tryInit rejects, and its messages), and its bitmap + config example byte
// for byte as Redis holds it.

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

const vectorsDir = "../../tests/vectors"

func loadVectors(t *testing.T, name string, into any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(vectorsDir, name))
	if err != nil {
		t.Fatalf("read vectors: %v", err)
	}
	if err := json.Unmarshal(b, into); err != nil {
		t.Fatalf("parse %s: %v", name, err)
	}
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("hex %q: %v", s, err)
	}
	return b
}

type hashVectors struct {
	Configs []struct {
		Name string `json:"name"`
		Size uint64 `json:"size"`
		K    uint32 `json:"k"`
	} `json:"configs"`
	Count int `json:"count"`
	Cases []struct {
		ID       string              `json:"id"`
		Text     *string             `json:"text"`
		Len      int                 `json:"len"`
		ItemHex  string              `json:"item_hex"`
		Hash1    string              `json:"hash1"`
		Hash1Hex string              `json:"hash1_hex"`
		Hash2    string              `json:"hash2"`
		Hash2Hex string              `json:"hash2_hex"`
		Indexes  map[string][]uint64 `json:"indexes"`
	} `json:"cases"`
}

func TestHashVectors(t *testing.T) {
	var v hashVectors
	loadVectors(t, "redisson_hash_vectors.json", &v)
	if len(v.Cases) != v.Count || v.Count == 0 || len(v.Configs) != 2 {
		t.Fatalf("vector file: %d cases, count %d, %d configs", len(v.Cases), v.Count, len(v.Configs))
	}
	checked := 0
	for _, c := range v.Cases {
		item := mustHex(t, c.ItemHex)
		if len(item) != c.Len {
			t.Fatalf("%s: item_hex has %d bytes, len %d", c.ID, len(item), c.Len)
		}
		h1, h2 := Hash128(item)
		if got := fmt.Sprintf("%016x", h1); got != c.Hash1Hex {
			t.Errorf("%s: h1 %s, want %s", c.ID, got, c.Hash1Hex)
		}
		if got := fmt.Sprintf("%016x", h2); got != c.Hash2Hex {
			t.Errorf("%s: h2 %s, want %s", c.ID, got, c.Hash2Hex)
		}
		// the signed decimals are Java's longs
		if got := strconv.FormatInt(int64(h1), 10); got != c.Hash1 {
			t.Errorf("%s: h1 as a Java long %s, want %s", c.ID, got, c.Hash1)
		}
		if got := strconv.FormatInt(int64(h2), 10); got != c.Hash2 {
			t.Errorf("%s: h2 as a Java long %s, want %s", c.ID, got, c.Hash2)
		}
		// a nil slice and an empty one are the same (empty) item
		if c.Len == 0 {
			if a, b := Hash128(nil); a != h1 || b != h2 {
				t.Errorf("%s: Hash128(nil) differs from Hash128([]byte{})", c.ID)
			}
		}
		for _, cfg := range v.Configs {
			want, ok := c.Indexes[cfg.Name]
			if !ok {
				t.Fatalf("%s: no indexes for %s", c.ID, cfg.Name)
			}
			got, err := Indexes(item, cfg.Size, cfg.K)
			if err != nil {
				t.Fatalf("%s: Indexes(%d, %d): %v", c.ID, cfg.Size, cfg.K, err)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s %s: indexes %v, want %v", c.ID, cfg.Name, got, want)
			}
		}
		checked++
	}
	t.Logf("%d items, %d configs (hash impl %s)", checked, len(v.Configs), HashImpl())
}

type paramsVectors struct {
	MaxSize uint64 `json:"max_size"`
	Rows    []struct {
		N       int64  `json:"n"`
		P       string `json:"p"`
		Size    uint64 `json:"size"`
		K       uint32 `json:"k"`
		TryInit string `json:"tryInit"`
		Zero    bool   `json:"size_is_zero"`
		Exceeds bool   `json:"exceeds_max_size"`
	} `json:"rows"`
}

// redissonMessage is tryInit's message for a rejected row.
func redissonMessage(zero bool, size uint64) string {
	if zero {
		return "Bloom filter calculated size is 0"
	}
	return fmt.Sprintf("Bloom filter size can't be greater than 4294967294. But calculated size is %d", size)
}

func TestParamsVectors(t *testing.T) {
	var v paramsVectors
	loadVectors(t, "redisson_params.json", &v)
	if v.MaxSize != MaxSize {
		t.Fatalf("max_size %d, MaxSize %d", v.MaxSize, MaxSize)
	}
	c := openClient(t)
	ctx := context.Background()
	ok, rejected := 0, 0
	for i, r := range v.Rows {
		p, err := strconv.ParseFloat(r.P, 64)
		if err != nil {
			t.Fatalf("row %d: p %q: %v", i, r.P, err)
		}
		size, k, err := OptimalParams(r.N, p)
		f := openFilter(t, c, fmt.Sprintf("go:params:%d", i))
		created, initErr := f.Init(ctx, r.N, p)
		if r.TryInit == "ok" {
			ok++
			if err != nil || size != r.Size || k != r.K {
				t.Errorf("n=%d p=%s: size %d k %d err %v, want size %d k %d", r.N, r.P, size, k, err, r.Size, r.K)
			}
			if initErr != nil || !created {
				t.Errorf("n=%d p=%s: Init created=%v err=%v", r.N, r.P, created, initErr)
				continue
			}
			info, err := f.Info(ctx)
			if err != nil || info.Size != r.Size || info.HashIterations != r.K || info.ExpectedInsertions != r.N ||
				info.FalseProbability != p {
				t.Errorf("n=%d p=%s: Info %+v err %v", r.N, r.P, info, err)
			}
			if _, err := f.Delete(ctx); err != nil {
				t.Fatal(err)
			}
			continue
		}
		rejected++
		if !errors.Is(err, ErrBadParams) || size != 0 || k != 0 {
			t.Errorf("n=%d p=%s: OptimalParams = %d, %d, %v; want ErrBadParams", r.N, r.P, size, k, err)
		}
		want := "init: " + redissonMessage(r.Zero, r.Size)
		var e *Error
		if !errors.As(initErr, &e) || e.Code != CodeBadParams || e.Message != want || created {
			t.Errorf("n=%d p=%s: Init created=%v err=%v; want BG_EBADPARAMS %q", r.N, r.P, created, initErr, want)
		}
		if !errors.Is(initErr, ErrBadParams) {
			t.Errorf("n=%d p=%s: errors.Is(err, ErrBadParams) is false", r.N, r.P)
		}
	}
	// the other rejections tryInit makes, and bloomguard's own (n <= 0)
	for _, tc := range []struct {
		n    int64
		p    float64
		want string
	}{
		{1000, 1.0000000000000002, "Bloom filter false probability can't be greater than 1"},
		{1000, math.Inf(1), "Bloom filter false probability can't be greater than 1"},
		{1000, -math.SmallestNonzeroFloat64, "Bloom filter false probability can't be negative"},
		{1000, math.NaN(), "Bloom filter calculated size is 0"},
		{0, 0.01, "Bloom filter expected insertions must be positive, got 0"},
		{-5, 0.01, "Bloom filter expected insertions must be positive, got -5"},
		{math.MaxInt64, 0.5, "Bloom filter size can't be greater than 4294967294. But calculated size is 9223372036854775807"},
	} {
		if _, _, err := OptimalParams(tc.n, tc.p); !errors.Is(err, ErrBadParams) {
			t.Errorf("OptimalParams(%d, %v): %v, want ErrBadParams", tc.n, tc.p, err)
		}
		f := openFilter(t, c, "go:params:extra")
		_, err := f.Init(ctx, tc.n, tc.p)
		var e *Error
		if !errors.As(err, &e) || e.Code != CodeBadParams || e.Message != "init: "+tc.want {
			t.Errorf("Init(%d, %v): %v, want %q", tc.n, tc.p, err, tc.want)
		}
	}
	t.Logf("%d accepted rows, %d rejected rows", ok, rejected)
	if ok == 0 || rejected == 0 {
		t.Fatal("the vector file has no accepted or no rejected rows")
	}
}

type bitmapExample struct {
	Filter struct {
		ExpectedInsertions int64   `json:"expectedInsertions"`
		FalseProbability   float64 `json:"falseProbability"`
		Size               uint64  `json:"size"`
		K                  uint32  `json:"k"`
	} `json:"filter"`
	RedisKeys struct {
		Bitmap     string `json:"bitmap"`
		ConfigHash string `json:"config_hash"`
	} `json:"redis_keys"`
	Items []struct {
		Text     string   `json:"text"`
		ItemHex  string   `json:"item_hex"`
		Hash1Hex string   `json:"hash1_hex"`
		Hash2Hex string   `json:"hash2_hex"`
		Indexes  []uint64 `json:"indexes"`
		NewBits  int      `json:"newly_set_bits"`
	} `json:"items"`
	SetBitCount    int    `json:"set_bit_count"`
	BitmapRedisLen int    `json:"bitmap_redis_len"`
	BitmapRedisHex string `json:"bitmap_redis_hex"`
	ConfigHash     struct {
		Fields map[string]string `json:"fields_for_this_filter"`
	} `json:"config_hash"`
}

func TestBitmapExample(t *testing.T) {
	var v bitmapExample
	loadVectors(t, "redisson_bitmap_example.json", &v)
	ctx := context.Background()
	size, k, err := OptimalParams(v.Filter.ExpectedInsertions, v.Filter.FalseProbability)
	if err != nil || size != v.Filter.Size || k != v.Filter.K {
		t.Fatalf("OptimalParams: %d %d %v", size, k, err)
	}

	c := openClient(t)
	f := openFilter(t, c, v.RedisKeys.Bitmap)
	r := raw(t)
	r.must(t, "DEL", v.RedisKeys.Bitmap, v.RedisKeys.ConfigHash)
	created, err := f.Init(ctx, v.Filter.ExpectedInsertions, v.Filter.FalseProbability)
	if err != nil || !created {
		t.Fatalf("Init: %v %v", created, err)
	}
	for i, it := range v.Items {
		item := mustHex(t, it.ItemHex)
		if string(item) != it.Text {
			t.Fatalf("item %d: hex and text differ", i)
		}
		h1, h2 := Hash128(item)
		if fmt.Sprintf("%016x %016x", h1, h2) != it.Hash1Hex+" "+it.Hash2Hex {
			t.Errorf("%s: hash %016x %016x", it.Text, h1, h2)
		}
		idx, err := Indexes(item, size, k)
		if err != nil || fmt.Sprint(idx) != fmt.Sprint(it.Indexes) {
			t.Errorf("%s: indexes %v %v, want %v", it.Text, idx, err, it.Indexes)
		}
		// alternate the three ways of adding one item
		var added bool
		switch i % 3 {
		case 0:
			added, err = f.Add(ctx, item)
		case 1:
			added, err = f.AddString(ctx, it.Text)
		default:
			var n int
			n, err = f.AddMany(ctx, [][]byte{item})
			added = n == 1
		}
		if err != nil || added != (it.NewBits > 0) {
			t.Fatalf("add %s: added=%v err=%v, want added=%v", it.Text, added, err, it.NewBits > 0)
		}
	}

	got, err := r.do("GET", v.RedisKeys.Bitmap)
	if err != nil {
		t.Fatal(err)
	}
	bitmap, _ := got.(string)
	if len(bitmap) != v.BitmapRedisLen || hex.EncodeToString([]byte(bitmap)) != v.BitmapRedisHex {
		t.Fatalf("bitmap (%d bytes):\n%x\nwant (%d bytes):\n%s", len(bitmap), bitmap, v.BitmapRedisLen, v.BitmapRedisHex)
	}
	if n := r.must(t, "BITCOUNT", v.RedisKeys.Bitmap); n != int64(v.SetBitCount) {
		t.Errorf("BITCOUNT %v, want %d", n, v.SetBitCount)
	}
	fields, _ := r.must(t, "HGETALL", v.RedisKeys.ConfigHash).([]any)
	gotFields := map[string]string{}
	for i := 0; i+1 < len(fields); i += 2 {
		gotFields[fields[i].(string)] = fields[i+1].(string)
	}
	// Redisson's four fields, as Redisson writes them (extra fields of bloomguard's own are allowed)
	for _, name := range []string{"size", "hashIterations", "expectedInsertions", "falseProbability"} {
		if want := v.ConfigHash.Fields[name]; want == "" || gotFields[name] != want {
			t.Errorf("config field %s = %q, want %q", name, gotFields[name], want)
		}
	}

	// read back through the binding
	info, err := f.Info(ctx)
	if err != nil || info != (Info{Size: size, HashIterations: k, ExpectedInsertions: 100, FalseProbability: 0.01}) {
		t.Errorf("Info %+v %v", info, err)
	}
	items := make([][]byte, len(v.Items))
	for i, it := range v.Items {
		items[i] = []byte(it.Text)
	}
	present, err := f.ContainsMany(ctx, items)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range present {
		if !p {
			t.Errorf("%s absent", v.Items[i].Text)
		}
	}
	if n, err := f.Count(ctx); err != nil || n != int64(len(v.Items)) {
		t.Errorf("Count %d %v, want %d", n, err, len(v.Items))
	}
	// adding them again sets no new bit
	if n, err := f.AddMany(ctx, items); err != nil || n != 0 {
		t.Errorf("AddMany again: %d %v", n, err)
	}
	if _, err := f.Delete(ctx); err != nil {
		t.Fatal(err)
	}
}
