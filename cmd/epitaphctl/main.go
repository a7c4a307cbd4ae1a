// Command epitaphctl manages an epitaph broker through its HTTP management
// API, with the command names and argument syntax of rabbitmqctl
// (set_policy, list_queues, ...) and rabbitmqadmin (declare, delete, get).
//
//	epitaphctl set_policy DLX ".*" '{"dead-letter-exchange":"my-dlx"}' --apply-to queues
//	epitaphctl declare queue name=work queue_type=quorum arguments='{"x-delivery-limit":3}'
//	epitaphctl get queue=dlq count=10
//
// Global flags (anywhere on the command line): --url (default
// http://127.0.0.1:15672, or EPITAPH_URL), --user/--password (guest/guest),
// --vhost/-p (default "/"), --formatter table|json. Output is an aligned
// table by default, JSON with --formatter json. Errors go to stderr and
// exit 1.
package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// errUsage marks command-line mistakes (the usage hint is printed).
var errUsage = errors.New("usage")

// cli is one invocation.
type cli struct {
	client    *client
	vhost     string
	formatter string
	priority  int
	applyTo   string
	quiet     bool
	queue     string // watch_dead_letters --queue
	count     int    // watch_dead_letters --count
	stdin     io.Reader
	stdout    io.Writer
}

const usage = `Usage: epitaphctl [flags] COMMAND [ARGS]

rabbitmqctl-style commands:
  set_policy [-p VHOST] [--priority N] [--apply-to queues|exchanges|all|classic_queues|quorum_queues] NAME PATTERN DEFINITION
  clear_policy NAME
  list_policies
  list_queues [COLUMN...]       (default: name type messages consumers dead_letter_exchange)
  list_exchanges [COLUMN...]    (default: name type)
  list_bindings
  list_vhosts | list_users | list_permissions
  list_connections [COLUMN...]  (default: name user vhost peer_host peer_port state)
  close_connection NAME [REASON]  (NAME as list_connections shows it)
  purge_queue NAME
  export_definitions FILE|-
  import_definitions FILE|-

rabbitmqadmin-style commands:
  declare queue name=Q [durable=true] [auto_delete=false] [queue_type=classic|quorum] [arguments='{...}']
  declare exchange name=X type=T [durable=true] [auto_delete=false] [internal=false] [arguments='{...}']
  declare binding source=X destination=D [destination_type=queue|exchange] [routing_key=K] [arguments='{...}']
  delete queue name=Q
  delete exchange name=X
  delete binding source=X destination=D [destination_type=queue] [properties_key=K]
  get queue=Q [count=N]         (peeks: messages stay, delivery counts unchanged)

Dead letters:
  peek_queue queue=Q [position=P] [count=N] [FILTER=VALUE...]
                                (browse: nothing acquired; FILTER: reason, source_queue, exchange, death_after,
                                death_before, error_condition, min_count, sql)
  start_redrive queue=DLQ target=first_death_queue|last_death_queue|original_exchange|queue [target_queue=Q]
                [rate=N] [max=N] [dry_run=true] [FILTER=VALUE...]
  list_redrives
  redrive_status ID
  cancel_redrive ID
  delete_redrive ID             (an ended task and its report; a running one: cancel it first)

Streams:
  watch_dead_letters [-p VHOST] [--queue Q] [--count N]
                                (each message that dies, as it dies; --formatter json: one JSON event per line)

Flags:
`

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("epitaphctl", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	defURL := os.Getenv("EPITAPH_URL")
	if defURL == "" {
		defURL = "http://127.0.0.1:15672"
	}
	url := fs.String("url", defURL, "management API base URL (env EPITAPH_URL)")
	user := fs.StringP("user", "u", "guest", "user name")
	password := fs.String("password", "guest", "password")
	c := &cli{stdin: stdin, stdout: stdout}
	fs.StringVarP(&c.vhost, "vhost", "p", "/", "virtual host")
	fs.StringVarP(&c.formatter, "formatter", "f", "table", "output format: table or json")
	fs.IntVar(&c.priority, "priority", 0, "set_policy: policy priority")
	fs.StringVar(&c.applyTo, "apply-to", "all", "set_policy: queues, exchanges, all, classic_queues or quorum_queues")
	fs.BoolVarP(&c.quiet, "quiet", "q", false, "no informational messages")
	fs.StringVar(&c.queue, "queue", "", "watch_dead_letters: only this queue's events")
	fs.IntVar(&c.count, "count", 0, "watch_dead_letters: stop after this many events (0: until the broker ends the stream)")
	timeout := fs.Duration("timeout", 30*time.Second, "HTTP request timeout")
	help := fs.BoolP("help", "h", false, "show this help")
	if err := fs.Parse(args); err != nil {
		fmt.Fprintf(stderr, "Error: %v\nRun 'epitaphctl --help' for usage.\n", err)
		return 1
	}
	if *help {
		fmt.Fprint(stdout, usage+fs.FlagUsages())
		return 0
	}
	switch c.formatter {
	case "table", "pretty_table":
		c.formatter = "table"
	case "json":
	default:
		fmt.Fprintf(stderr, "Error: unknown formatter %q (table or json)\n", c.formatter)
		return 1
	}
	rest := fs.Args()
	if len(rest) == 0 {
		fmt.Fprint(stderr, usage+fs.FlagUsages())
		return 1
	}
	c.client = &client{base: strings.TrimRight(*url, "/"), user: *user, password: *password,
		http: &http.Client{Timeout: *timeout}}
	if err := c.dispatch(rest[0], rest[1:]); err != nil {
		fmt.Fprintf(stderr, "Error: %v\n", err)
		if errors.Is(err, errUsage) {
			fmt.Fprintf(stderr, "Run 'epitaphctl --help' for usage.\n")
		}
		return 1
	}
	return 0
}

func (c *cli) dispatch(cmd string, args []string) error {
	switch cmd {
	case "set_policy":
		return c.setPolicy(args)
	case "clear_policy":
		return c.clearPolicy(args)
	case "list_policies":
		return c.listPolicies(args)
	case "list_queues":
		return c.listQueues(args)
	case "list_exchanges":
		return c.listExchanges(args)
	case "list_bindings":
		return c.listBindings(args)
	case "list_vhosts":
		return c.listSimple(args, "/api/vhosts", []string{"name"})
	case "list_users":
		return c.listSimple(args, "/api/users", []string{"name", "tags"})
	case "list_permissions":
		return c.listSimple(args, "/api/vhosts/"+esc(c.vhost)+"/permissions", []string{"user", "configure", "write", "read"})
	case "list_connections":
		return c.listConnections(args)
	case "close_connection":
		return c.closeConnection(args)
	case "purge_queue":
		return c.purgeQueue(args)
	case "export_definitions":
		return c.exportDefinitions(args)
	case "import_definitions":
		return c.importDefinitions(args)
	case "declare":
		return c.declare(args)
	case "delete":
		return c.delete(args)
	case "get":
		return c.get(args)
	case "peek_queue":
		return c.peekQueue(args)
	case "start_redrive":
		return c.startRedrive(args)
	case "list_redrives":
		return c.listRedrives(args)
	case "redrive_status":
		return c.redriveStatus(args)
	case "cancel_redrive":
		return c.cancelRedrive(args)
	case "delete_redrive":
		return c.deleteRedrive(args)
	case "watch_dead_letters":
		return c.watchDeadLetters(args)
	}
	return fmt.Errorf("%w: unknown command %q", errUsage, cmd)
}

// info prints an informational line (table mode, not quiet), as rabbitmqctl does.
func (c *cli) info(format string, a ...any) {
	if c.quiet || c.formatter == "json" {
		return
	}
	fmt.Fprintf(c.stdout, format+"\n", a...)
}
