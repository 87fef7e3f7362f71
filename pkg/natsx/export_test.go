package natsx

// DurablesOf is the permission table's durable consumers of user, as stream and durable name,
// for the external tests.
func DurablesOf(user string) [][2]string {
	var out [][2]string
	for _, d := range grants[user].durables {
		out = append(out, [2]string{d.stream, d.name})
	}
	return out
}
