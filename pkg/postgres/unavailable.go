package postgres

import (
	"errors"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// IsUnavailable reports whether err says the database could not be used at all, rather than
// that a statement failed: the server refused or dropped the connection (down, restarting,
// in crash recovery, failing over, out of connection slots, a standby that cannot write).
// Work that failed so is retried as long as the outage lasts (natsx.Unavailable), never given
// up on as a bad message.
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	var connect *pgconn.ConnectError
	if errors.As(err, &connect) {
		return true
	}
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		switch {
		case strings.HasPrefix(pg.Code, "08"): // connection exception
			return true
		case pg.Code == "57P01", pg.Code == "57P02", pg.Code == "57P03": // admin or crash shutdown, cannot connect now
			return true
		case pg.Code == "53300", pg.Code == "25006": // too many connections; read-only (a standby after failover)
			return true
		}
		return false
	}
	var netErr net.Error
	return errors.As(err, &netErr) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed) || pgconn.SafeToRetry(err)
}
