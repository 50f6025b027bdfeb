package override

import (
	"testing"

	"flotilla.io/flotilla/apis/policy/v1alpha1"
)

func TestOverrideImage(t *testing.T) {
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	op := func(c v1alpha1.ImageComponent, o v1alpha1.OverriderOperator, v string) *v1alpha1.ImageOverrider {
		return &v1alpha1.ImageOverrider{Component: c, Operator: o, Value: v}
	}
	cases := map[string]struct {
		image string
		o     *v1alpha1.ImageOverrider
		want  string
	}{
		"replace registry":   {"nginx:1.27", op(v1alpha1.Registry, v1alpha1.OverriderOpReplace, "registry.cn.example:5000"), "registry.cn.example:5000/nginx:1.27"},
		"replace a registry": {"docker.io/library/nginx", op(v1alpha1.Registry, v1alpha1.OverriderOpReplace, "mirror.example"), "mirror.example/library/nginx"},
		"first component without a dot is not a registry": {"library/nginx", op(v1alpha1.Registry, v1alpha1.OverriderOpReplace, "mirror.example"), "mirror.example/library/nginx"},
		"localhost is a registry":                         {"localhost/nginx", op(v1alpha1.Registry, v1alpha1.OverriderOpRemove, ""), "nginx"},
		"add to registry":                                 {"registry.example/nginx", op(v1alpha1.Registry, v1alpha1.OverriderOpAdd, ".cn"), "registry.example.cn/nginx"},
		"remove registry, port included":                  {"registry.example:5000/team/nginx:1.27", op(v1alpha1.Registry, v1alpha1.OverriderOpRemove, ""), "team/nginx:1.27"},
		"replace repository":                              {"registry.example/team/nginx:1.27", op(v1alpha1.Repository, v1alpha1.OverriderOpReplace, "mirror/nginx"), "registry.example/mirror/nginx:1.27"},
		"add to repository":                               {"nginx:1.27", op(v1alpha1.Repository, v1alpha1.OverriderOpAdd, "-slim"), "nginx-slim:1.27"},
		"replace tag":                                     {"nginx:1.27", op(v1alpha1.Tag, v1alpha1.OverriderOpReplace, "1.28"), "nginx:1.28"},
		"replace missing tag":                             {"registry.example:5000/nginx", op(v1alpha1.Tag, v1alpha1.OverriderOpReplace, "1.28"), "registry.example:5000/nginx:1.28"},
		"add to tag":                                      {"nginx:1.27", op(v1alpha1.Tag, v1alpha1.OverriderOpAdd, "-alpine"), "nginx:1.27-alpine"},
		"remove tag":                                      {"nginx:1.27", op(v1alpha1.Tag, v1alpha1.OverriderOpRemove, ""), "nginx"},
		"remove digest when no tag":                       {"nginx@" + digest, op(v1alpha1.Tag, v1alpha1.OverriderOpRemove, ""), "nginx"},
		"remove tag, keep digest":                         {"nginx:1.27@" + digest, op(v1alpha1.Tag, v1alpha1.OverriderOpRemove, ""), "nginx@" + digest},
		"replace tag with digest":                         {"nginx:1.27", op(v1alpha1.Tag, v1alpha1.OverriderOpReplace, digest), "nginx@" + digest},
		"replace digest with tag":                         {"nginx@" + digest, op(v1alpha1.Tag, v1alpha1.OverriderOpReplace, "1.28"), "nginx:1.28"},
		"other parts survive a tag change":                {"registry.example:5000/a/b:1", op(v1alpha1.Tag, v1alpha1.OverriderOpReplace, "2"), "registry.example:5000/a/b:2"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := overrideImage(tc.image, tc.o)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("overrideImage(%q) = %q, want %q", tc.image, got, tc.want)
			}
		})
	}
}

func TestOverrideImageErrors(t *testing.T) {
	cases := map[string]struct {
		image string
		o     v1alpha1.ImageOverrider
	}{
		"remove repository": {"nginx", v1alpha1.ImageOverrider{Component: v1alpha1.Repository, Operator: v1alpha1.OverriderOpRemove}},
		"unknown operator":  {"nginx", v1alpha1.ImageOverrider{Component: v1alpha1.Tag, Operator: "prepend", Value: "x"}},
		"unknown component": {"nginx", v1alpha1.ImageOverrider{Component: "Digest", Operator: v1alpha1.OverriderOpRemove}},
		"no repository":     {"registry.example/", v1alpha1.ImageOverrider{Component: v1alpha1.Tag, Operator: v1alpha1.OverriderOpRemove}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got, err := overrideImage(tc.image, &tc.o); err == nil {
				t.Errorf("overrideImage(%q) = %q, want an error", tc.image, got)
			}
		})
	}
}
