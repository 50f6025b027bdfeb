// Package doccmd extracts the shell commands of a markdown guide, so that a
// test can run every command a user is told to type and the guides cannot
// drift from the product.
//
// A command is a line of a fenced code block whose info string is sh, bash
// or shell. Lines ending in a backslash continue on the next line, a
// leading "$ " prompt is dropped, and comments (a # at the start of a
// word, outside quotes) and blank lines are skipped. Blocks of any other
// kind (yaml, text, output without an info string) hold no commands.
package doccmd

import (
	"bufio"
	"bytes"
	"strings"
)

// Command is one shell command of a guide.
type Command struct {
	// Line is the 1-based line of the guide where the command starts.
	Line int
	// Text is the command as a shell reads it: continuation lines joined
	// with single spaces, without prompt or comment.
	Text string
}

// shellInfo are the info strings of fenced blocks whose lines are commands.
var shellInfo = map[string]bool{"sh": true, "bash": true, "shell": true}

// Extract returns the commands of the markdown document md, in order.
func Extract(md []byte) []Command {
	var (
		cmds    []Command
		fence   string // the open fence ("```" or "~~~..."), "" outside a block
		inShell bool
		pending strings.Builder
		start   int
	)
	sc := bufio.NewScanner(bytes.NewReader(md))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if fence == "" {
			if f, info, ok := openFence(trimmed); ok {
				fence, inShell = f, shellInfo[info]
			}
			continue
		}
		if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]) == "" {
			fence, inShell = "", false
			pending.Reset()
			continue
		}
		if !inShell {
			continue
		}
		part := stripComment(trimmed)
		if pending.Len() == 0 {
			part = strings.TrimPrefix(part, "$ ")
			if part == "" {
				continue
			}
			start = n
		}
		if cont, ok := strings.CutSuffix(part, `\`); ok {
			pending.WriteString(strings.TrimSpace(cont))
			pending.WriteString(" ")
			continue
		}
		pending.WriteString(part)
		if text := strings.TrimSpace(pending.String()); text != "" {
			cmds = append(cmds, Command{Line: start, Text: text})
		}
		pending.Reset()
	}
	return cmds
}

// openFence reports whether line opens a fenced block, with the fence and
// the block's info string (its first word, lower case).
func openFence(line string) (fence, info string, ok bool) {
	for _, c := range []string{"```", "~~~"} {
		if strings.HasPrefix(line, c) {
			i := len(c)
			for i < len(line) && line[i] == c[0] {
				i++
			}
			words := strings.Fields(line[i:])
			if len(words) > 0 {
				info = strings.ToLower(words[0])
			}
			return line[:i], info, true
		}
	}
	return "", "", false
}

// stripComment removes a shell comment from line: a # that starts a word
// outside quotes, and everything after it.
func stripComment(line string) string {
	var quote rune
	prev := ' '
	for i, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '#' && (prev == ' ' || prev == '\t'):
			return strings.TrimSpace(line[:i])
		}
		prev = r
	}
	return strings.TrimSpace(line)
}
