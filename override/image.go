package override

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"flotilla.io/flotilla/apis/policy/v1alpha1"
)

// image is a container image reference split the way the image overrider
// sees it: [registry/]repository[:tag][@digest].
type image struct {
	registry, repository, tag, digest string
}

// parseImage splits an image reference. The first path component is the
// registry only when it looks like a host (has a dot or a port, or is
// localhost), as container runtimes decide; no default registry is added.
func parseImage(s string) (image, error) {
	var im image
	rest := s
	if i := strings.IndexByte(rest, '@'); i >= 0 {
		rest, im.digest = rest[:i], rest[i+1:]
	}
	if i := strings.LastIndexByte(rest, ':'); i >= 0 && i > strings.LastIndexByte(rest, '/') {
		rest, im.tag = rest[:i], rest[i+1:]
	}
	if i := strings.IndexByte(rest, '/'); i >= 0 && (strings.ContainsAny(rest[:i], ".:") || rest[:i] == "localhost") {
		im.registry, rest = rest[:i], rest[i+1:]
	}
	im.repository = rest
	if im.repository == "" {
		return image{}, fmt.Errorf("image %q has no repository", s)
	}
	return im, nil
}

func (im image) String() string {
	s := im.repository
	if im.registry != "" {
		s = im.registry + "/" + s
	}
	if im.tag != "" {
		s += ":" + im.tag
	}
	if im.digest != "" {
		s += "@" + im.digest
	}
	return s
}

// isDigest tells a digest (algorithm:hex) from a tag, which has no colon.
func isDigest(s string) bool { return strings.Contains(s, ":") }

// override changes one component of the image: add appends the value,
// replace sets it, remove clears it. A Tag operation changes the tag, or
// the digest when the image has no tag; replacing it with a tag drops a
// digest and vice versa, since the two would disagree.
func (im image) override(o *v1alpha1.ImageOverrider) (image, error) {
	var set func(cur string) string
	switch o.Operator {
	case v1alpha1.OverriderOpAdd:
		set = func(cur string) string { return cur + o.Value }
	case v1alpha1.OverriderOpReplace:
		set = func(string) string { return o.Value }
	case v1alpha1.OverriderOpRemove:
		set = func(string) string { return "" }
	default:
		return im, fmt.Errorf("unknown operator %q", o.Operator)
	}
	switch o.Component {
	case v1alpha1.Registry:
		im.registry = set(im.registry)
	case v1alpha1.Repository:
		if o.Operator == v1alpha1.OverriderOpRemove {
			return im, errors.New("an image cannot lose its repository")
		}
		im.repository = set(im.repository)
	case v1alpha1.Tag:
		switch {
		case o.Operator == v1alpha1.OverriderOpReplace && isDigest(o.Value):
			im.tag, im.digest = "", o.Value
		case o.Operator == v1alpha1.OverriderOpReplace:
			im.tag, im.digest = o.Value, ""
		case im.tag != "" || im.digest == "":
			im.tag = set(im.tag)
		default:
			im.digest = set(im.digest)
		}
	default:
		return im, fmt.Errorf("unknown image component %q", o.Component)
	}
	return im, nil
}

// overrideImages applies an image overrider: to the image its predicate
// points at, or to every container image (not init containers) of a pod or
// a workload's pod template. Other objects have no images to change.
func overrideImages(obj *unstructured.Unstructured, paths pathMapper, o *v1alpha1.ImageOverrider) error {
	if o.Predicate != nil {
		path, err := paths(o.Predicate.Path)
		if err != nil {
			return err
		}
		return overrideImageAt(obj.Object, path, o)
	}
	list, path, err := containers(obj)
	if err != nil || list == nil {
		return err
	}
	for i, c := range list {
		cm, ok := c.(map[string]any)
		if !ok {
			continue
		}
		s, ok := cm["image"].(string)
		if !ok {
			continue
		}
		if cm["image"], err = overrideImage(s, o); err != nil {
			return fmt.Errorf("container %v: %w", cm["name"], err)
		}
		list[i] = cm
	}
	return unstructured.SetNestedSlice(obj.Object, list, path...)
}

func overrideImage(s string, o *v1alpha1.ImageOverrider) (string, error) {
	im, err := parseImage(s)
	if err != nil {
		return "", err
	}
	if im, err = im.override(o); err != nil {
		return "", err
	}
	return im.String(), nil
}

// overrideImageAt changes the image string at a JSON pointer into doc.
func overrideImageAt(doc map[string]any, pointer string, o *v1alpha1.ImageOverrider) error {
	if !strings.HasPrefix(pointer, "/") {
		return fmt.Errorf("predicate path %q is not a JSON pointer", pointer)
	}
	segs := strings.Split(pointer[1:], "/")
	var (
		cur any = doc
		set func(string)
	)
	for _, seg := range segs {
		seg = strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[seg]
			if !ok {
				return fmt.Errorf("predicate path %s: %s not found", pointer, seg)
			}
			cur, set = v, func(s string) { c[seg] = s }
		case []any:
			n, err := strconv.Atoi(seg)
			if err != nil || n < 0 || n >= len(c) {
				return fmt.Errorf("predicate path %s: no item %s", pointer, seg)
			}
			cur, set = c[n], func(s string) { c[n] = s }
		default:
			return fmt.Errorf("predicate path %s: %s is not in an object or array", pointer, seg)
		}
	}
	s, ok := cur.(string)
	if !ok {
		return fmt.Errorf("predicate path %s is not a string", pointer)
	}
	img, err := overrideImage(s, o)
	if err != nil {
		return err
	}
	set(img)
	return nil
}
