package outbox

// LockKey is the advisory lock the relays of one database take turns on.
const LockKey = lockKey
