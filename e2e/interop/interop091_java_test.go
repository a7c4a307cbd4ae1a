package interop

// The seeds' Java examples (testdata/java-seeds), compiled against Debian's
// RabbitMQ Java client and run as written: each fragment is wrapped in a
// main that declares only what the fragment uses without declaring it, the
// ConnectionFactory with nothing but its host and port set.

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
)

// javaClassPath is Debian's RabbitMQ Java client (librabbitmq-client-java)
// and the logging facade it needs.
var javaClassPath = []string{"/usr/share/java/amqp-client.jar", "/usr/share/java/slf4j-api.jar", "/usr/share/java/slf4j-nop.jar"}

const javaInstall = "apt-get install -y default-jdk-headless librabbitmq-client-java"

// javaSeeds compiles every seed and returns the class directory.
func javaSeeds(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"javac", "java"} {
		if _, err := exec.LookPath(tool); err != nil {
			need(t, tool+" not found", javaInstall)
		}
	}
	for _, jar := range javaClassPath {
		if _, err := os.Stat(jar); err != nil {
			need(t, jar+" missing", javaInstall)
		}
	}
	snippets, err := filepath.Glob(filepath.Join("testdata", "java-seeds", "*.snippet"))
	require.NoError(t, err)
	require.NotEmpty(t, snippets)
	dir := t.TempDir()
	var sources []string
	for _, s := range snippets {
		code, err := os.ReadFile(s)
		require.NoError(t, err)
		name := strings.TrimSuffix(filepath.Base(s), ".snippet")
		src := filepath.Join(dir, name+".java")
		require.NoError(t, os.WriteFile(src, []byte(wrapSeed(name, string(code))), 0o644))
		sources = append(sources, src)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	args := append([]string{"-nowarn", "-cp", strings.Join(javaClassPath, ":"), "-d", dir}, sources...)
	out, err := exec.CommandContext(ctx, "javac", args...).CombinedOutput()
	require.NoError(t, err, "javac: %s", out)
	return dir
}

// wrapSeed puts a seed fragment, unchanged, into a class with a main. The
// fragments use factory, addresses, connection and channel; the wrapper
// declares those the fragment does not declare itself: a fragment that
// declares connection gets only factory; one that assigns it gets factory,
// addresses and connection (null); one that uses channel without either
// gets a connection and a channel of its own.
func wrapSeed(name, code string) string {
	var prelude string
	switch {
	case strings.Contains(code, "Connection connection ="):
		prelude = ""
	case strings.Contains(code, "connection = factory"):
		prelude = "        Address[] addresses = {new Address(factory.getHost(), factory.getPort())};\n" +
			"        Connection connection = null;\n"
	default:
		prelude = "        Connection connection = factory.newConnection();\n" +
			"        Channel channel = connection.createChannel();\n"
	}
	return `import com.rabbitmq.client.*;
import java.nio.charset.StandardCharsets;
import java.util.*;

public class ` + name + ` {
    public static void main(String[] argv) throws Exception {
        ConnectionFactory factory = new ConnectionFactory();
        factory.setHost(System.getProperty("amqp.host"));
        factory.setPort(Integer.getInteger("amqp.port"));
` + prelude + `// ---- the seed, as written ----
` + code + `
// ---- end of the seed ----
    }
}
`
}

// javaProc is a running seed: its output, its standard input.
type javaProc struct {
	t     *testing.T
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	mu    sync.Mutex
	out   bytes.Buffer
	done  chan struct{}
	err   error
}

type lockedWriter struct{ p *javaProc }

func (w lockedWriter) Write(b []byte) (int, error) {
	w.p.mu.Lock()
	defer w.p.mu.Unlock()
	return w.p.out.Write(b)
}

// startSeed runs a compiled seed; it is killed when the test ends if it is
// still running (the consumers never exit by themselves).
func startSeed(t *testing.T, classes string, b broker091, name string) *javaProc {
	t.Helper()
	cp := strings.Join(append([]string{classes}, javaClassPath...), ":")
	p := &javaProc{t: t, name: name, done: make(chan struct{})}
	p.cmd = exec.Command("java", "-Damqp.host="+b.host, "-Damqp.port="+b.port, "-cp", cp, name)
	p.cmd.Stdout, p.cmd.Stderr = lockedWriter{p}, lockedWriter{p}
	var err error
	p.stdin, err = p.cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, p.cmd.Start())
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		t.Logf("%s output:\n%s", name, p.output())
	})
	return p
}

func (p *javaProc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// waitFor polls the output until it contains s n times.
func (p *javaProc) waitFor(s string, n int) {
	p.t.Helper()
	deadline := time.Now().Add(probeTimeout)
	for strings.Count(p.output(), s) < n {
		select {
		case <-p.done:
			require.Failf(p.t, "seed exited", "%s exited (%v) before printing %q %d times:\n%s", p.name, p.err, s, n, p.output())
		default:
		}
		require.True(p.t, time.Now().Before(deadline), "%s did not print %q %d times within %v:\n%s", p.name, s, n, probeTimeout, p.output())
		time.Sleep(20 * time.Millisecond)
	}
}

func (p *javaProc) send(line string) {
	p.t.Helper()
	_, err := io.WriteString(p.stdin, line+"\n")
	require.NoError(p.t, err)
}

// exit waits for a clean exit (status 0).
func (p *javaProc) exit() {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(probeTimeout):
		require.Failf(p.t, "seed did not exit", "%s:\n%s", p.name, p.output())
	}
	require.NoError(p.t, p.err, "%s exit status:\n%s", p.name, p.output())
	require.NotContains(p.t, p.output(), "Exception", "%s printed an exception", p.name)
}

// cleanupSeedTopology deletes the fixed names the seeds declare, before and
// after the test (a broker given by EPITAPH_INTEROP091_URL keeps them).
func cleanupSeedTopology(t *testing.T, tp *topology091, queues, exchanges []string) {
	t.Helper()
	clean := func() {
		for _, q := range queues {
			_, _ = tp.ch.QueueDelete(q, false, false, false)
		}
		for _, x := range exchanges {
			_ = tp.ch.ExchangeDelete(x, false, false)
		}
	}
	clean()
	t.Cleanup(clean)
}

// The rejected scenario: DLProducer publishes what it reads, NormalConsumer
// rejects it (requeue=false) into the dead-letter exchange, DLConsumer
// prints it.
func TestJavaSeedsRejected(t *testing.T) {
	classes := javaSeeds(t)
	b := startBroker091(t)
	tp := newTopology091(t, b)
	cleanupSeedTopology(t, tp, []string{"dl.queue.test", "normal.queue.test"}, []string{"normal.exchange.test", "dl.exchange.test"})

	producer := startSeed(t, classes, b, "DLProducer")
	producer.waitFor("> ", 1) // the exchange is declared
	normal := startSeed(t, classes, b, "NormalConsumer")
	tp.waitConsumers("normal.queue.test", 1)
	dl := startSeed(t, classes, b, "DLConsumer")
	tp.waitConsumers("dl.queue.test", 1)

	producer.send("first order")
	producer.send("second order")
	normal.waitFor(" [x] channel reject 'second order'", 1)
	dl.waitFor(" [x] channel Received DL message 'second order'", 1)
	producer.waitFor("> ", 3)
	producer.send("q")
	producer.exit()
	require.Equal(t, " [x] channel reject 'first order'\n [x] channel reject 'second order'\n", normal.output())
	require.Equal(t, " [x] channel Received DL message 'first order'\n [x] channel Received DL message 'second order'\n", dl.output())
}

// The expired scenario: messages wait out the queue's x-message-ttl (5 s)
// and reach the dead-letter queue, where MessageTTLConsumer prints them.
func TestJavaSeedsExpired(t *testing.T) {
	classes := javaSeeds(t)
	b := startBroker091(t)
	tp := newTopology091(t, b)
	cleanupSeedTopology(t, tp, []string{"msg.ttl.dl.queue.test", "msg.ttl.queue.test"}, []string{"msg.ttl.dl.exchange.test", "msg.ttl.exchange.test"})

	producer := startSeed(t, classes, b, "MessageTTLProducer")
	producer.waitFor("> ", 1)
	consumer := startSeed(t, classes, b, "MessageTTLConsumer")
	tp.waitConsumers("msg.ttl.dl.queue.test", 1)

	producer.send("expires soon")
	tp.waitMessages("msg.ttl.queue.test", 1) // it waits in the queue first
	consumer.waitFor(" [x] dlChannel Received 'expires soon'", 1)
	producer.send("q")
	producer.exit()
	require.Equal(t, " [x] dlChannel Received 'expires soon'\n", consumer.output())
	tp.waitMessages("msg.ttl.queue.test", 0)
}

// The length-limit scenario: a queue of at most 5 messages drops its head
// into the dead-letter exchange when the sixth and seventh arrive.
func TestJavaSeedsMaxLength(t *testing.T) {
	classes := javaSeeds(t)
	b := startBroker091(t)
	tp := newTopology091(t, b)
	cleanupSeedTopology(t, tp, []string{"length.limit.dl.queue.test", "length.limit.queue.test"}, []string{"length.limit.dl.exchange.test", "length.limit.exchange.test"})

	producer := startSeed(t, classes, b, "QueueLengthLimitProducer")
	producer.waitFor("> ", 1)
	consumer := startSeed(t, classes, b, "QueueLengthLimitConsumer")
	tp.waitConsumers("length.limit.dl.queue.test", 1)

	for i := 1; i <= 7; i++ {
		producer.send("m" + string(rune('0'+i)))
	}
	consumer.waitFor(" [x] dlChannel Received 'm2'", 1)
	producer.waitFor("> ", 8)
	producer.send("q")
	producer.exit()
	require.Equal(t, " [x] dlChannel Received 'm1'\n [x] dlChannel Received 'm2'\n", consumer.output())
	tp.waitMessages("length.limit.queue.test", 5)
}

// The guide's declaration example: a direct exchange, and a queue naming it
// as its dead-letter exchange.
func TestJavaSeedsDeclareWithDLX(t *testing.T) {
	classes := javaSeeds(t)
	b := startBroker091(t)
	tp := newTopology091(t, b)
	cleanupSeedTopology(t, tp, []string{"myqueue"}, []string{"some.exchange.name"})

	// The fragment leaves its connection open (it is a fragment), so the
	// program does not exit: the test waits for the queue, then stops it.
	startSeed(t, classes, b, "DeclareWithDLX")
	tp.waitQueue("myqueue", "declared", func(amqp091.Queue) bool { return true })
	require.NoError(t, tp.ch.ExchangeDeclarePassive("some.exchange.name", "direct", false, false, false, false, nil))
}

// javaProbe compiles Probe091.java, the RabbitMQ Java client's view of a
// delivery (header values with their Java classes); it has one operation,
// get --queue Q.
func javaProbe(t *testing.T) client091 {
	t.Helper()
	classes := javaSeeds(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "javac", "-nowarn", "-cp", strings.Join(javaClassPath, ":"), "-d", classes, "Probe091.java").CombinedOutput()
	require.NoError(t, err, "javac: %s", out)
	cp := strings.Join(append([]string{classes}, javaClassPath...), ":")
	return client091{name: "java", cmd: []string{"java"}, argv: func(b broker091, op string, args []string) []string {
		require.Equal(t, "get", op, "the Java probe only gets")
		require.Len(t, args, 2)
		require.Equal(t, "--queue", args[0])
		return []string{"-cp", cp, "Probe091", b.host, b.port, args[1], "10"}
	}}
}

func TestJava091ReadsRejectedFrom10(t *testing.T) { checkReadsRejectedFrom10(t, javaProbe(t)) }
func TestJava091ReadsExpiredFrom10(t *testing.T)  { checkReadsExpiredFrom10(t, javaProbe(t)) }
