package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gauntlet-dev/gauntlet/framework"
)

// S3Server is an S3-compatible server (versitygw, posix backend on an
// emptyDir) running in a spec's namespace, with one bucket and a Secret
// holding its keys under the names a DatabaseCluster's credentialsSecret
// expects.
type S3Server struct {
	// Endpoint is the server's URL inside the cluster.
	Endpoint string
	// Bucket is created empty; Secret holds accessKeyID and secretAccessKey.
	Bucket, Secret string
	pod            string
	access, secret string
}

// s3Port is where versitygw listens.
const s3Port = 7070

// StartS3Server runs the server from in.Env.S3ServerImage, waits until it
// answers, and creates the bucket through a port-forward.
func StartS3Server(ctx context.Context, t *testing.T, in SpecInput, bucket string) *S3Server {
	t.Helper()
	g := NewWithT(t)
	g.Expect(in.Env.S3ServerImage).NotTo(BeEmpty(), "S3_SERVER_IMAGE names the versitygw image (make images builds it)")
	s := &S3Server{Bucket: bucket, Secret: "s3-keys", pod: "s3", access: "gauntlet-e2e", secret: "gauntlet-e2e-secret"}
	labels := map[string]string{"app.kubernetes.io/name": "versitygw"}
	g.Expect(in.Env.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: in.Namespace, Name: s.Secret},
		StringData: map[string]string{"accessKeyID": s.access, "secretAccessKey": s.secret},
	})).To(Succeed())
	g.Expect(in.Env.Client.Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: in.Namespace, Name: s.pod, Labels: labels},
		Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532), FSGroup: ptr.To[int64](65532),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name: "versitygw", Image: in.Env.S3ServerImage, ImagePullPolicy: corev1.PullIfNotPresent,
				Args:  []string{"--access", s.access, "--secret", s.secret, "--port", fmt.Sprintf(":%d", s3Port), "posix", "/data"},
				Ports: []corev1.ContainerPort{{Name: "s3", ContainerPort: s3Port}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(s3Port)}},
					PeriodSeconds: 1},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	})).To(Succeed())
	g.Expect(in.Env.Client.Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: in.Namespace, Name: "s3"},
		Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Name: "s3", Port: s3Port, TargetPort: intstr.FromInt32(s3Port)}}},
	})).To(Succeed())
	s.Endpoint = fmt.Sprintf("http://s3.%s.svc.cluster.local:%d", in.Namespace, s3Port)

	err := framework.PollFor(ctx, "the S3 server to be ready", 2*time.Minute, pollInterval, func(ctx context.Context) (bool, string, error) {
		p := &corev1.Pod{}
		if err := in.Env.Client.Get(ctx, client.ObjectKey{Namespace: in.Namespace, Name: s.pod}, p); err != nil {
			return false, err.Error(), nil
		}
		return framework.PodReady(p), fmt.Sprintf("phase %s, statuses %+v", p.Status.Phase, p.Status.ContainerStatuses), nil
	})
	g.Expect(err).NotTo(HaveOccurred())
	mc, done := s.client(ctx, t, in)
	defer done()
	g.Expect(mc.MakeBucket(ctx, bucket, minio.MakeBucketOptions{})).To(Succeed())
	return s
}

// Keys lists the bucket's keys under prefix, through a port-forward.
func (s *S3Server) Keys(ctx context.Context, t *testing.T, in SpecInput, prefix string) []string {
	t.Helper()
	mc, done := s.client(ctx, t, in)
	defer done()
	var keys []string
	for obj := range mc.ListObjects(ctx, s.Bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		NewWithT(t).Expect(obj.Err).NotTo(HaveOccurred())
		keys = append(keys, obj.Key)
	}
	return keys
}

func (s *S3Server) client(ctx context.Context, t *testing.T, in SpecInput) (*minio.Client, func()) {
	t.Helper()
	g := NewWithT(t)
	pf, err := framework.ForwardPort(ctx, in.Env.Config, in.Namespace, s.pod, s3Port)
	g.Expect(err).NotTo(HaveOccurred())
	mc, err := minio.New(fmt.Sprintf("127.0.0.1:%d", pf.Local), &minio.Options{
		Creds: credentials.NewStaticV4(s.access, s.secret, ""), Region: "us-east-1", BucketLookup: minio.BucketLookupPath,
	})
	g.Expect(err).NotTo(HaveOccurred())
	return mc, pf.Close
}
