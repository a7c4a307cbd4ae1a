package link

// ownerChecks, when set, checks at run time the two ownership rules of a
// connection (see conn and outbuf): the loop's state is used only by the
// goroutine that runs serve, and a socket write is made only by the
// goroutine that holds outbuf.busy. Only this package's tests set it
// (owner_test.go); in a production build it stays nil and each check is
// one load of this variable and a branch not taken: no field, no call.
var ownerChecks ownerChecker

// ownerChecker is told who claims what, and panics when the rules are
// broken, naming what was done on the wrong goroutine.
type ownerChecker interface {
	// claimLoop: the calling goroutine is c's loop from now on; endLoop:
	// c's loop has ended (forget it).
	claimLoop(c *conn)
	endLoop(c *conn)
	// inLoop: the caller uses c's loop state (what names the use).
	inLoop(c *conn, what string)
	// tookWrite: the caller set o.busy, under o.mu, and so holds o's
	// socket's write side. writing: the caller is about to write to the
	// socket (byLoop: flushOut's inline write, else the writer's).
	tookWrite(o *outbuf)
	writing(o *outbuf, byLoop bool)
}
