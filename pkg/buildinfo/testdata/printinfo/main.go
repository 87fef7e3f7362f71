// Command printinfo prints buildinfo.Get, for the stamping test.
package main

import (
	"fmt"

	"github.com/stockflow/stockflow/pkg/buildinfo"
)

func main() { fmt.Println(buildinfo.Get()) }
