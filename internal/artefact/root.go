package artefact

import (
	"crypto/rand"
	"os"
	"path"
)

// WriteIn puts data at name under root all at once: a temporary file beside it, fsync, then a
// rename, or with exclusive a hard link, which fails with fs.ErrExist if name exists (never
// replacing anything); then the folder's fsync. Every path goes through root, so a symlink
// planted in the folder cannot lead the write outside it. name's folder must exist.
func WriteIn(root *os.Root, name string, data []byte, perm os.FileMode, exclusive bool) error {
	tmp := path.Join(path.Dir(name), "."+path.Base(name)+"."+rand.Text()+".tmp")
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	defer root.Remove(tmp) // after a rename there is nothing left to remove
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm) // past the umask
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && exclusive {
		err = root.Link(tmp, name)
	} else if err == nil {
		err = root.Rename(tmp, name)
	}
	if err != nil {
		return err
	}
	d, err := root.Open(path.Dir(name))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
