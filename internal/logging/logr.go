// Package logging connects the libraries' loggers to the process's logrus
// logger, so that a process has one log backend and one format.
package logging

import (
	"fmt"

	"github.com/go-logr/logr"
	"github.com/sirupsen/logrus"
)

// Logr returns a logr.Logger writing to l: logr's V(0) is Info, higher
// verbosities are Debug.
func Logr(l logrus.FieldLogger) logr.Logger { return logr.New(&sink{entry: l}) }

type sink struct {
	entry logrus.FieldLogger
	name  string
}

func (s *sink) Init(logr.RuntimeInfo) {}

func (s *sink) Enabled(level int) bool {
	if e, ok := s.entry.(*logrus.Entry); ok {
		if level > 0 {
			return e.Logger.IsLevelEnabled(logrus.DebugLevel)
		}
		return e.Logger.IsLevelEnabled(logrus.InfoLevel)
	}
	return true
}

func (s *sink) Info(level int, msg string, kv ...any) {
	e := s.with(kv)
	if level > 0 {
		e.Debug(msg)
		return
	}
	e.Info(msg)
}

func (s *sink) Error(err error, msg string, kv ...any) { s.with(kv).WithError(err).Error(msg) }

func (s *sink) WithValues(kv ...any) logr.LogSink {
	return &sink{entry: s.with(kv), name: s.name}
}

func (s *sink) WithName(name string) logr.LogSink {
	if s.name != "" {
		name = s.name + "." + name
	}
	return &sink{entry: s.entry.WithField("logger", name), name: name}
}

func (s *sink) with(kv []any) logrus.FieldLogger {
	e := s.entry
	for i := 0; i+1 < len(kv); i += 2 {
		if k, ok := kv[i].(string); ok {
			e = e.WithField(k, kv[i+1])
		}
	}
	return e
}

// New returns a logrus logger at level (debug, info, warn, error) writing
// format (text or json), the two flags every binary has.
func New(level, format string) (*logrus.Logger, error) {
	logger := logrus.New()
	l, err := logrus.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	logger.SetLevel(l)
	switch format {
	case "json":
		logger.SetFormatter(&logrus.JSONFormatter{})
	case "text":
		logger.SetFormatter(&logrus.TextFormatter{FullTimestamp: true})
	default:
		return nil, fmt.Errorf("--log-format: want text or json, got %q", format)
	}
	return logger, nil
}
