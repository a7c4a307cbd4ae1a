package link

import (
	"testing"
	"testing/synctest"

	"github.com/epitaph-mq/epitaph/amqp10"
)

// The registry's view of a connection, read from the test's goroutine
// while the loop runs (the owner checks are on), and a close by name that
// reaches the client from the loop as RabbitMQ's operator close.
func TestConnectionsListAndCloseByName(t *testing.T) {
	pipeTest(t, func(t *testing.T, p *pipePeer) {
		p.begin(0, 100)
		p.begin(1, 100)
		synctest.Wait()
		conns := p.srv.Connections()
		if len(conns) != 1 {
			t.Fatalf("Connections() = %+v, want one", conns)
		}
		ci := conns[0]
		if ci.Sessions != 2 || ci.User != "guest" || ci.VHost != "/" || ci.ContainerID != "pipe-peer" ||
			ci.AuthMechanism != "none" || ci.ChannelMax != 15 || ci.Peer.String() != "127.0.0.1:40000" {
			t.Errorf("connection info %+v", ci)
		}
		if ci.RecvOctets == 0 || ci.SendOctets == 0 || ci.RecvCount == 0 || ci.SendCount == 0 {
			t.Errorf("counters not counted: %+v", ci)
		}
		if want := "127.0.0.1:40000 -> "; len(ci.Name) <= len(want) || ci.Name[:len(want)] != want {
			t.Errorf("name %q, want it to start with %q", ci.Name, want)
		}
		if p.srv.CloseConnection("1.2.3.4:5 -> 6.7.8.9:10", "no such") {
			t.Error("closed a connection that does not exist")
		}
		if !p.srv.CloseConnection(ci.Name, `say "bye"`) {
			t.Fatal("CloseConnection found no connection")
		}
		c := expect[*amqp10.Close](p, 0)
		if c.Error == nil || c.Error.Condition != amqp10.ErrCondInternalError ||
			c.Error.Description != `Connection forced: "say \"bye\""` {
			t.Fatalf("close %+v", c.Error)
		}
		p.send(0, &amqp10.Close{})
		p.expectEOF()
		synctest.Wait()
		if conns := p.srv.Connections(); len(conns) != 0 {
			t.Errorf("closed connection still listed: %+v", conns)
		}
	})
}

// The sessions of a connection, as its loop describes them on request.
func TestSessionsAskedOfTheLoop(t *testing.T) {
	pipeTest(t, func(t *testing.T, p *pipePeer) {
		p.begin(3, 100)
		p.attachPublisher(3, 7, "/queues/q")
		p.attachConsumer(3, 2, "/queues/q", true)
		p.send(3, linkFlow(2, 0, 100, 0, 5))
		synctest.Wait()
		conns := p.srv.Connections()
		if len(conns) != 1 {
			t.Fatalf("Connections() = %+v", conns)
		}
		sessions, ok := p.srv.Sessions(t.Context(), conns[0].Name)
		if !ok || len(sessions) != 1 {
			t.Fatalf("Sessions() = %+v, %v", sessions, ok)
		}
		s := sessions[0]
		if s.Channel != 3 || s.HandleMax != 255 || s.IncomingWindow == 0 {
			t.Errorf("session %+v", s)
		}
		if len(s.IncomingLinks) != 1 || s.IncomingLinks[0].Handle != 7 || s.IncomingLinks[0].Credit == 0 ||
			s.IncomingLinks[0].Management {
			t.Errorf("incoming links %+v", s.IncomingLinks)
		}
		if len(s.OutgoingLinks) != 1 || s.OutgoingLinks[0].Handle != 2 || s.OutgoingLinks[0].Queue != "q" ||
			s.OutgoingLinks[0].Credit != 5 || !s.OutgoingLinks[0].SendSettled {
			t.Errorf("outgoing links %+v", s.OutgoingLinks)
		}
		if _, ok := p.srv.Sessions(t.Context(), "1.2.3.4:5 -> 6.7.8.9:10"); ok {
			t.Error("sessions of a connection that does not exist")
		}
	})
}
