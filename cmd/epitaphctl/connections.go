package main

import (
	"fmt"
	"io"
	"net/http"
)

// listConnections is rabbitmqctl list_connections: every connection the
// user may see, over all vhosts, with rabbitmqctl's default columns.
func (c *cli) listConnections(args []string) error {
	return c.listSimple(args, "/api/connections", []string{"name", "user", "vhost", "peer_host", "peer_port", "state"})
}

// closeConnection is rabbitmqctl close_connection, by connection name (as
// list_connections shows it) rather than Erlang pid: DELETE
// /api/connections/{name} with the reason in X-Reason, which the client
// sees in its close description.
func (c *cli) closeConnection(args []string) error {
	if len(args) < 1 || len(args) > 2 {
		return fmt.Errorf("%w: close_connection takes NAME [REASON], got %d arguments", errUsage, len(args))
	}
	req, err := http.NewRequest(http.MethodDelete, c.client.base+"/api/connections/"+esc(args[0]), nil)
	if err != nil {
		return err
	}
	if len(args) == 2 {
		req.Header.Set("X-Reason", args[1])
	}
	req.SetBasicAuth(c.client.user, c.client.password)
	resp, err := c.client.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("reading the answer to DELETE: %w", err)
	}
	if err := answerError(resp.StatusCode, body); err != nil {
		return err
	}
	c.info("Closing connection %q ...", args[0])
	return nil
}
