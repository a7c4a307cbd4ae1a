package auth

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/epitaph-mq/epitaph/router"
)

// The users and permissions sections of RabbitMQ's definitions JSON. The
// router reads and writes the document and hands these sections over
// (router.Accounts).

type defUser struct {
	Name             string          `json:"name"`
	PasswordHash     string          `json:"password_hash"`
	Password         *string         `json:"password,omitempty"`
	HashingAlgorithm string          `json:"hashing_algorithm"`
	Tags             json.RawMessage `json:"tags"`
}

type defPermission struct {
	User      string `json:"user"`
	VHost     string `json:"vhost"`
	Configure string `json:"configure"`
	Write     string `json:"write"`
	Read      string `json:"read"`
}

// LoadDefinitions parses the users and permissions sections of a
// definitions document and returns what applies them: users, then
// permissions, stopping at the first error, which names the item. Users may
// carry password_hash (with hashing_algorithm) or, for convenience, a plain
// "password".
func (r *Registry) LoadDefinitions(users, permissions json.RawMessage) (apply func() error, err error) {
	var us []defUser
	var ps []defPermission
	if len(users) > 0 {
		if err := json.Unmarshal(users, &us); err != nil {
			return nil, fmt.Errorf("users: %w", err)
		}
	}
	if len(permissions) > 0 {
		if err := json.Unmarshal(permissions, &ps); err != nil {
			return nil, fmt.Errorf("permissions: %w", err)
		}
	}
	return func() error {
		for _, u := range us {
			if err := r.loadUser(u); err != nil {
				return fmt.Errorf("user '%s': %w", u.Name, err)
			}
		}
		for _, p := range ps {
			err := r.SetPermission(Permission{User: p.User, VHost: cmp.Or(p.VHost, router.DefaultVHost), Configure: p.Configure, Write: p.Write, Read: p.Read})
			if err != nil {
				return fmt.Errorf("permission of user '%s' in vhost '%s': %w", p.User, p.VHost, err)
			}
		}
		return nil
	}, nil
}

func (r *Registry) loadUser(d defUser) error {
	u := User{Name: d.Name, PasswordHash: d.PasswordHash, HashingAlgorithm: cmp.Or(d.HashingAlgorithm, HashSHA256)}
	if d.Password != nil {
		h, err := HashPassword(u.HashingAlgorithm, *d.Password)
		if err != nil {
			return err
		}
		u.PasswordHash = h
	}
	tags, err := parseTags(d.Tags)
	if err != nil {
		return err
	}
	u.Tags = tags
	return r.PutUser(u)
}

// parseTags accepts a list of tags or a comma-separated string (older exports).
func parseTags(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err == nil {
		return list, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("%w: tags must be a list or a string", router.ErrInvalidArgument)
	}
	var out []string
	for t := range strings.SplitSeq(s, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out, nil
}

// ExportDefinitions returns the users and permissions sections of a
// definitions document, sorted by name (permissions by user, then vhost).
func (r *Registry) ExportDefinitions() (users, permissions json.RawMessage, err error) {
	us := []defUser{}
	for _, u := range r.Users() {
		tags, _ := json.Marshal(append([]string{}, u.Tags...))
		us = append(us, defUser{Name: u.Name, PasswordHash: u.PasswordHash, HashingAlgorithm: u.HashingAlgorithm, Tags: tags})
	}
	ps := []defPermission{}
	for _, p := range r.Permissions() {
		ps = append(ps, defPermission(p))
	}
	if users, err = json.Marshal(us); err != nil {
		return nil, nil, err
	}
	if permissions, err = json.Marshal(ps); err != nil {
		return nil, nil, err
	}
	return users, permissions, nil
}
