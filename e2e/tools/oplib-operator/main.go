// An operator built on operator-lib's OperatorCondition API exactly as operator authors use it,
// for the e2e test e2e/tests/lifecycle_operator_lib.rs: it runs as a process against the test
// API server with its ServiceAccount's in-cluster credentials (token, CA and namespace in
// /var/run/secrets/kubernetes.io/serviceaccount, KUBERNETES_SERVICE_HOST/PORT), finds its
// OperatorCondition through OPERATOR_CONDITION_NAME and the namespace file (operator-lib's
// InClusterFactory), says Upgradeable=False while it "migrates", and Upgradeable=True once the
// file named by its only argument exists; then it keeps running until it is stopped.
//
// Built by e2e/tools/build-oplib-operator.sh into the e2e cache (outside git).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	apiv2 "github.com/operator-framework/api/pkg/operators/v2"
	"github.com/operator-framework/operator-lib/conditions"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: oplib-operator <migration-done-file>")
		os.Exit(2)
	}
	done := os.Args[1]
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	cfg, err := config.GetConfig()
	if err != nil {
		fail("loading the in-cluster config: %v", err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		fail("building the scheme: %v", err)
	}
	if err := apiv2.AddToScheme(scheme); err != nil {
		fail("building the scheme: %v", err)
	}
	cl, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		fail("building the client: %v", err)
	}
	// Who the API server takes this process for (the test checks it is the ServiceAccount).
	review := &authenticationv1.SelfSubjectReview{}
	if err := cl.Create(ctx, review); err != nil {
		fail("SelfSubjectReview: %v", err)
	}
	fmt.Printf("operator: running as %s\n", review.Status.UserInfo.Username)
	factory := conditions.InClusterFactory{Client: cl}
	key, err := factory.GetNamespacedName()
	if err != nil {
		fail("finding the OperatorCondition: %v", err)
	}
	upgradeable, err := factory.NewCondition(apiv2.ConditionType(apiv2.Upgradeable))
	if err != nil {
		fail("NewCondition: %v", err)
	}
	fmt.Printf("operator: OperatorCondition %s\n", key)

	set(ctx, upgradeable, metav1.ConditionFalse, "Migrating", "migrating the widgets' storage")
	for !exists(done) {
		wait(ctx, 200*time.Millisecond)
	}
	set(ctx, upgradeable, metav1.ConditionTrue, "MigrationDone", "widgets migrated")
	<-ctx.Done()
	fmt.Println("operator: stopped")
}

// set retries until operator-lib's Set (a get and an update of the OperatorCondition) succeeds:
// the OperatorCondition or the RBAC letting this ServiceAccount write it may not exist yet,
// and an update can conflict with another writer.
func set(ctx context.Context, c conditions.Condition, status metav1.ConditionStatus, reason, message string) {
	for {
		err := c.Set(ctx, status, conditions.WithReason(reason), conditions.WithMessage(message))
		if err == nil {
			fmt.Printf("operator: Upgradeable=%s (%s)\n", status, reason)
			return
		}
		fmt.Printf("operator: setting Upgradeable=%s: %v (retrying)\n", status, err)
		wait(ctx, time.Second)
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func wait(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
		fmt.Println("operator: stopped")
		os.Exit(0)
	case <-time.After(d):
	}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "operator: "+format+"\n", args...)
	os.Exit(1)
}
