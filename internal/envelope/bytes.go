package envelope

import (
	"encoding/json"
	"slices"

	"github.com/tollgate-dev/tollgate/internal/cleantext"
)

// Data returns the bytes of the success envelope around encoded data, as [WriteData]
// writes them, for a page that shows an envelope rather than answering with it.
func Data(encoded []byte) []byte { return slices.Concat(okPrefix, encoded, okSuffix) }

// Error returns the bytes of the error envelope of message, as [WriteError] writes
// them.
func Error(message string) []byte {
	msg, _ := json.Marshal(cleantext.Message(message)) // a string always encodes
	return slices.Concat(errPrefix, msg, errSuffix)
}
