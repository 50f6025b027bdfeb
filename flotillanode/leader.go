package flotillanode

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"flotilla.io/flotilla/internal/kube"
)

// LeaderConfig says which Lease an active/standby pair of flotilla-nodes
// for one member contend for.
type LeaderConfig struct {
	Client    kube.Interface
	Namespace string
	Name      string
	// Identity tells the candidates apart (host name and a random part).
	Identity string
	// LeaseDuration is how long a standby waits after the last renewal
	// before it takes over.
	LeaseDuration time.Duration
}

// errLostLease ends a process that stopped being the active one, so that
// it never works beside the new leader; its Deployment restarts it as a
// standby.
var errLostLease = errors.New("lost the leader Lease")

// RunAsLeader waits until this process holds the Lease, then runs fn until
// ctx ends or the Lease is lost. A standby taking over adopts the member
// pods of its predecessor by their identity labels (as after a restart),
// so a takeover moves no pod.
//
// The Lease is held, and renewed, until fn has returned: on a stop, fn is
// cancelled first and the Lease released only once it is done, so a
// standby never starts beside writes still in flight. A Lease lost to
// failed renewals cancels fn at once; the standby can take it only a
// LeaseDuration after the last renewal, a third of it after fn is told.
func RunAsLeader(ctx context.Context, cfg LeaderConfig, fn func(context.Context) error) error {
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: cfg.Namespace, Name: cfg.Name},
		Client:     cfg.Client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: cfg.Identity},
	}
	// work ends fn; elect runs the elector, which outlives ctx while fn
	// is still running.
	work, stopWork := context.WithCancel(ctx)
	defer stopWork()
	elect, stopElect := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElect()
	var mu sync.Mutex
	started := false
	done := make(chan error, 1)
	stopWatch := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !started {
			stopElect() // a standby just leaves
		}
	})
	defer stopWatch()
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   cfg.LeaseDuration,
		RenewDeadline:   cfg.LeaseDuration * 2 / 3,
		RetryPeriod:     cfg.LeaseDuration / 5,
		ReleaseOnCancel: true,
		Name:            cfg.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leading context.Context) {
				mu.Lock()
				if ctx.Err() != nil {
					mu.Unlock()
					stopElect()
					return
				}
				started = true
				mu.Unlock()
				// fn stops when ctx ends or the Lease is lost (leading ends).
				fnCtx, cancel := context.WithCancel(work)
				defer cancel()
				stopOnLoss := context.AfterFunc(leading, cancel)
				defer stopOnLoss()
				log.G(ctx).WithField("lease", cfg.Namespace+"/"+cfg.Name).Info("active: holding the leader Lease")
				done <- fn(fnCtx)
				stopElect() // fn is done: now the Lease may go
			},
			OnStoppedLeading: stopWork,
			OnNewLeader: func(id string) {
				if id != cfg.Identity {
					log.G(ctx).WithField("leader", id).Info("standby: another flotilla-node is active")
				}
			},
		},
	})
	if err != nil {
		return err
	}
	le.Run(elect)
	mu.Lock()
	ran := started
	mu.Unlock()
	if !ran {
		return ctx.Err()
	}
	err = <-done
	switch {
	case err != nil:
		return err
	case ctx.Err() != nil:
		return nil
	}
	return errLostLease
}
