package bundle

// ValidPart is validPart, for the tests of package bundle_test.
var ValidPart = validPart

// Parts is every part of b, by path, for the tests of package bundle_test.
func (b *Bundle) Parts() map[string][]byte { return b.parts }
