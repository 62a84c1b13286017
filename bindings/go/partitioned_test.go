package bloomguard

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// A partitioned filter through InitPartitioned, on the queue and (WithQueues(0)) on the blocking
// calls: its checks, every operation, Info's Partitions, and a plain Init keeping it.
func TestInitPartitioned(t *testing.T) {
	for _, queues := range []int{1, 0} {
		t.Run(fmt.Sprintf("queues=%d", queues), func(t *testing.T) {
			ctx := context.Background()
			c := openClient(t, WithQueues(queues))
			f := openFilter(t, c, uniqueName(t))
			if _, err := f.InitPartitioned(ctx, 1000, 0.01, 16385); !errors.Is(err, ErrInvalid) ||
				!strings.Contains(err.Error(), "partitions must be from 1 to 16384") {
				t.Fatalf("P=16385: %v", err)
			}
			if _, err := f.InitPartitioned(ctx, 600_000_000, 0.01, 1); !errors.Is(err, ErrBadParams) ||
				!strings.Contains(err.Error(), "use at least 2 partitions") {
				t.Fatalf("600 M in one partition: %v", err)
			}
			if created, err := f.InitPartitioned(ctx, 100_000, 0.01, 8); err != nil || !created {
				t.Fatalf("InitPartitioned: %v %v", created, err)
			}
			if created, err := f.Init(ctx, 1000, 0.01); err != nil || created {
				t.Fatalf("a plain Init of a partitioned filter: %v %v, want kept", created, err)
			}
			info, err := f.Info(ctx)
			if err != nil || info.Partitions != 8 || info.HashIterations != 7 || info.Size < 958_506 {
				t.Fatalf("Info: %+v %v", info, err)
			}
			items := make([][]byte, 2000)
			for i := range items {
				items[i] = []byte(fmt.Sprintf("g-%d", i))
			}
			if n, err := f.AddMany(ctx, items); err != nil || n < 1990 {
				t.Fatalf("AddMany: %d %v", n, err)
			}
			got, err := f.ContainsMany(ctx, items)
			if err != nil {
				t.Fatal(err)
			}
			for i, ok := range got {
				if !ok {
					t.Fatalf("item %d absent", i)
				}
			}
			if ok, err := f.Contains(ctx, items[7]); err != nil || !ok {
				t.Fatalf("Contains: %v %v", ok, err)
			}
			if n, err := f.Count(ctx); err != nil || n < 1950 || n > 2050 {
				t.Fatalf("Count: %d %v", n, err)
			}
			if deleted, err := f.Delete(ctx); err != nil || !deleted {
				t.Fatalf("Delete: %v %v", deleted, err)
			}
			if _, err := f.Contains(ctx, items[7]); !errors.Is(err, ErrNotInitialized) {
				t.Fatalf("Contains after Delete: %v", err)
			}
		})
	}
}

// A partitioned filter rotated (Swap) to other n and P with WithPartitions: the new items answer,
// Info names the new P; Locked rewrites in place and refuses another geometry (ErrBadParams).
func TestRotatePartitioned(t *testing.T) {
	ctx := context.Background()
	c := openClient(t)
	f := openFilter(t, c, uniqueName(t))
	if _, err := f.InitPartitioned(ctx, 20_000, 0.01, 4); err != nil {
		t.Fatal(err)
	}
	items := make([][]byte, 3000)
	for i := range items {
		items[i] = []byte(fmt.Sprintf("rot-%d", i))
	}
	err := f.Rotate(ctx, 40_000, 0.01, Swap, func(r *Rotation) error { return r.AddMany(items) }, WithPartitions(8))
	if err != nil {
		t.Fatalf("Rotate: %v", err)
	}
	got, err := f.ContainsMany(ctx, items)
	if err != nil {
		t.Fatal(err)
	}
	for i, ok := range got {
		if !ok {
			t.Fatalf("item %d absent after the rotation", i)
		}
	}
	if info, err := f.Info(ctx); err != nil || info.Partitions != 8 || info.ExpectedInsertions != 40_000 {
		t.Fatalf("Info: %+v %v", info, err)
	}
	// Locked rewrites in place: the partitions' geometry must stay
	err = f.Rotate(ctx, 20_000, 0.01, Locked, func(r *Rotation) error { return nil })
	if !errors.Is(err, ErrBadParams) || !strings.Contains(err.Error(), "keep (n, p) or use BG_ROTATE_SWAP") {
		t.Fatalf("Locked to another geometry: %v", err)
	}
	if err := f.Rotate(ctx, 40_000, 0.01, Locked, func(r *Rotation) error { return r.AddMany(items) }); err != nil {
		t.Fatalf("Locked: %v", err)
	}
	if got, err := f.ContainsMany(ctx, items); err != nil || !got[0] || !got[len(got)-1] {
		t.Fatalf("after Locked: %v", err)
	}
}
