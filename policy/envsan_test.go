package policy

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/confine-sandbox/confine/spec"
)

func TestEnvRefusal(t *testing.T) {
	tests := []struct {
		name  string
		class string // "" = allowed
	}{
		// loader
		{"LD_PRELOAD", "dynamic-loader variable"},
		{"LD_LIBRARY_PATH", "dynamic-loader variable"},
		{"ld_preload", "dynamic-loader variable"},
		{"Ld_Audit", "dynamic-loader variable"},
		{"DYLD_INSERT_LIBRARIES", "dynamic-loader variable"},
		{"GCONV_PATH", "dynamic-loader variable"},
		// interpreter hooks
		{"BASH_ENV", "interpreter start-up hook"},
		{"ENV", "interpreter start-up hook"},
		{"BASH_FUNC_ls%%", "interpreter start-up hook"},
		{"NODE_OPTIONS", "interpreter start-up hook"},
		{"PERL5OPT", "interpreter start-up hook"},
		{"JAVA_TOOL_OPTIONS", "interpreter start-up hook"},
		// git
		{"GIT_CONFIG", "git configuration override"},
		{"GIT_CONFIG_COUNT", "git configuration override"},
		{"GIT_CONFIG_KEY_0", "git configuration override"},
		{"GIT_CONFIG_VALUE_0", "git configuration override"},
		{"GIT_CONFIG_PARAMETERS", "git configuration override"},
		{"GIT_CONFIG_GLOBAL", "git configuration override"},
		{"git_config_system", "git configuration override"},
		{"GIT_CONFIG_NOSYSTEM", ""},
		{"GIT_DIR", "git repository redirect"},
		{"GIT_COMMON_DIR", "git repository redirect"},
		{"GIT_WORK_TREE", ""},
		{"GIT_SSH", "command hook"},
		{"GIT_SSH_COMMAND", "command hook"},
		{"git_ssh_command", "command hook"},
		{"GIT_ASKPASS", "command hook"},
		{"SSH_ASKPASS", "command hook"},
		{"GIT_EXEC_PATH", "command hook"},
		{"GIT_EXTERNAL_DIFF", "command hook"},
		{"GIT_PAGER", "command hook"},
		{"GIT_EDITOR", "command hook"},
		{"GIT_PROXY_COMMAND", "command hook"},
		{"GIT_TEMPLATE_DIR", "command hook"},
		{"GOAUTH", "command hook"},
		{"GIT_TERMINAL_PROMPT", ""},
		// agents
		{"SSH_AUTH_SOCK", "agent socket"},
		{"ssh_auth_sock", "agent socket"},
		{"GPG_AGENT_INFO", "agent socket"},
		// cloud
		{"AWS_SECRET_ACCESS_KEY", "cloud credentials"},
		{"AWS_PROFILE", "cloud credentials"},
		{"aws_region", "cloud credentials"},
		{"GCP_PROJECT", "cloud credentials"},
		{"GOOGLE_APPLICATION_CREDENTIALS", "cloud credentials"},
		{"GOOGLE_GHA_CREDENTIALS", "cloud credentials"},
		{"CLOUDSDK_CONFIG", "cloud credentials"},
		{"AZURE_CLIENT_ID", "cloud credentials"},
		{"KUBECONFIG", "cloud credentials"},
		// registries
		{"NPM_TOKEN", "registry or API token"},
		{"NODE_AUTH_TOKEN", "registry or API token"},
		{"CARGO_REGISTRY_TOKEN", "registry or API token"},
		{"CARGO_REGISTRIES_MYCORP_TOKEN", "registry or API token"},
		{"PYPI_TOKEN", "registry or API token"},
		{"TWINE_PASSWORD", "registry or API token"},
		{"GH_TOKEN", "registry or API token"},
		{"GITHUB_TOKEN", "registry or API token"},
		{"GITLAB_TOKEN", "registry or API token"},
		{"DOCKER_AUTH_CONFIG", "registry or API token"},
		{"HF_TOKEN", "registry or API token"},
		{"ANTHROPIC_API_KEY", "registry or API token"},
		{"OPENAI_API_KEY", "registry or API token"},
		{"NETRC", "registry or API token"},
		// secret-looking names
		{"ARM_CLIENT_SECRET", "name looks like a secret"},
		{"MY_TOKEN_FILE", "name looks like a secret"},
		{"db_password", "name looks like a secret"},
		{"MYSQL_PWD", "name looks like a secret"},
		{"SMTP_PASSWD", "name looks like a secret"},
		{"GPG_PASSPHRASE", "name looks like a secret"},
		{"STRIPE_KEY", "name looks like a secret"},
		{"SIGNING_KEY_ID", "name looks like a secret"},
		{"SERVICE_CREDENTIALS_JSON", "name looks like a secret"},
		{"NPM_CONFIG__AUTH", "name looks like a secret"},
		{"npm_config__authToken", "name looks like a secret"},
		{"REDIS_PASS", "name looks like a secret"},
		{"GITHUB_PAT", "name looks like a secret"},
		{"SOME_APIKEY_VALUE", "name looks like a secret"},
		{"TOKENIZERS_PARALLELISM", ""},
		// ordinary variables
		{"LANG", ""}, {"LC_ALL", ""}, {"TERM", ""}, {"TZ", ""}, {"PATH", ""}, {"HOME", ""},
		{"GOFLAGS", ""}, {"GOPROXY", ""}, {"CARGO_NET_OFFLINE", ""}, {"PIP_NO_INDEX", ""},
		{"npm_config_offline", ""}, {"PYTHONPATH", ""}, {"KEYBOARD", ""}, {"MONKEY", ""},
	}
	for _, tt := range tests {
		if got := envRefusal(tt.name); got != tt.class {
			t.Errorf("envRefusal(%q) = %q, want %q", tt.name, got, tt.class)
		}
	}
}

func TestSanitizeEnv(t *testing.T) {
	tests := []struct {
		name    string
		entries []string
		waived  []string
		want    []string
		errs    []string // substrings of the error; nil = success
	}{
		{"plain", []string{"LANG=C.UTF-8", "TERM=xterm"}, nil, []string{"LANG=C.UTF-8", "TERM=xterm"}, nil},
		{"sorted and last wins", []string{"B=1", "A=x", "B=2"}, nil, []string{"A=x", "B=2"}, nil},
		{"empty value", []string{"EMPTY="}, nil, []string{"EMPTY="}, nil},
		{"value with =", []string{"GOFLAGS=-mod=mod"}, nil, []string{"GOFLAGS=-mod=mod"}, nil},
		{"nosystem passes", []string{"GIT_CONFIG_NOSYSTEM=1"}, nil, []string{"GIT_CONFIG_NOSYSTEM=1"}, nil},
		{"ld_preload refused", []string{"LD_PRELOAD=/tmp/x.so"}, nil, nil, []string{"LD_PRELOAD is refused", "dynamic-loader"}},
		{"lower-case refused", []string{"ld_preload=/tmp/x.so"}, nil, nil, []string{"ld_preload is refused"}},
		{"every refusal named", []string{"AWS_SECRET_ACCESS_KEY=x", "LANG=C", "GH_TOKEN=y", "SSH_AUTH_SOCK=/s"}, nil, nil,
			[]string{"AWS_SECRET_ACCESS_KEY", "GH_TOKEN", "SSH_AUTH_SOCK", "env.waive"}},
		{"waived exact name", []string{"NODE_OPTIONS=--max-old-space-size=4096"}, []string{"NODE_OPTIONS"}, []string{"NODE_OPTIONS=--max-old-space-size=4096"}, nil},
		{"waiver is case-sensitive", []string{"node_options=x"}, []string{"NODE_OPTIONS"}, nil, []string{"node_options is refused"}},
		{"waiver is exact", []string{"AWS_REGION=eu"}, []string{"AWS_PROFILE"}, nil, []string{"AWS_REGION"}},
		{"no =", []string{"LANG"}, nil, nil, []string{`"LANG" is not NAME=VALUE`}},
		{"empty name", []string{"=x"}, nil, nil, []string{"empty variable name"}},
		{"NUL in name", []string{"A\x00B=1"}, nil, nil, []string{"byte 0x0"}},
		{"space in name", []string{"LD_PRELOAD =x"}, nil, nil, []string{"byte 0x20"}},
		{"non-ASCII name", []string{"ÄB=x"}, nil, nil, []string{"printable ASCII"}},
		{"NUL in value", []string{"A=x\x00y"}, nil, nil, []string{"A: value contains NUL"}},
		{"NUL in waived value", []string{"LD_PRELOAD=x\x00y"}, []string{"LD_PRELOAD"}, nil, []string{"value contains NUL"}},
		{"url password", []string{"PIP_INDEX_URL=https://u:hunter2@pypi.example/simple"}, nil, nil, []string{"PIP_INDEX_URL is refused", "URL with a password"}},
		{"url password in second url", []string{"PIP_EXTRA_INDEX_URL=https://a.example/ https://u:p@b.example/"}, nil, nil, []string{"PIP_EXTRA_INDEX_URL"}},
		{"url user only", []string{"REPO=ssh://git@github.com/x/y"}, nil, []string{"REPO=ssh://git@github.com/x/y"}, nil},
		{"url port", []string{"PROXY=http://proxy:3128/"}, nil, []string{"PROXY=http://proxy:3128/"}, nil},
		{"url password waived", []string{"PIP_INDEX_URL=https://u:p@x/"}, []string{"PIP_INDEX_URL"}, []string{"PIP_INDEX_URL=https://u:p@x/"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := SanitizeEnv(tt.entries, tt.waived)
			if tt.errs == nil {
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Fatalf("got %q, want %q", got, tt.want)
				}
				return
			}
			if !errors.Is(err, spec.ErrInvalidSpec) {
				t.Fatalf("err = %v, want ErrInvalidSpec", err)
			}
			for _, s := range tt.errs {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
			if got != nil {
				t.Errorf("env %q returned with an error", got)
			}
		})
	}
}

func TestBuildEnv(t *testing.T) {
	caller := []string{
		"LANG=en_US.UTF-8", "LC_ALL=C", "LC_SECRET_TOKEN=s3cr3t", "TERM=xterm-256color",
		"AWS_SECRET_ACCESS_KEY=x", "HOME=/root", "GOFLAGS=-trimpath", "CI_JOB_ID=7", "CI_JOB_TOKEN=t",
		"NOEQUALS", "PATH=/usr/bin",
	}
	tests := []struct {
		name    string
		src     EnvSources
		want    []string
		skipped []string
		err     string
	}{
		{"defaults only", EnvSources{Caller: caller, Passthrough: DefaultPassthrough()},
			[]string{"LANG=en_US.UTF-8", "LC_ALL=C", "TERM=xterm-256color"}, []string{"LC_SECRET_TOKEN"}, ""},
		{"set overrides passthrough", EnvSources{Caller: caller, Passthrough: []string{"LANG"}, Set: []string{"LANG=C.UTF-8", "X=1"}},
			[]string{"LANG=C.UTF-8", "X=1"}, nil, ""},
		{"pattern skips refused", EnvSources{Caller: caller, Passthrough: []string{"CI_*"}},
			[]string{"CI_JOB_ID=7"}, []string{"CI_JOB_TOKEN"}, ""},
		{"pattern passes waived", EnvSources{Caller: caller, Passthrough: []string{"CI_*"}, Waive: []string{"CI_JOB_TOKEN"}},
			[]string{"CI_JOB_ID=7", "CI_JOB_TOKEN=t"}, nil, ""},
		{"exact refused name is an error", EnvSources{Caller: caller, Passthrough: []string{"AWS_SECRET_ACCESS_KEY"}},
			nil, nil, "AWS_SECRET_ACCESS_KEY is refused"},
		{"refused set is an error", EnvSources{Set: []string{"GIT_SSH_COMMAND=ssh -i k"}}, nil, nil, "GIT_SSH_COMMAND is refused"},
		{"unset passthrough is absent", EnvSources{Caller: caller, Passthrough: []string{"NOT_SET"}}, []string{}, nil, ""},
		{"bad pattern", EnvSources{Passthrough: []string{"A*B"}}, nil, nil, "'*' may only end"},
		{"caller not inherited", EnvSources{Caller: caller}, []string{}, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env, skipped, err := BuildEnv(tt.src)
			if tt.err != "" {
				if !errors.Is(err, spec.ErrInvalidSpec) || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(env, tt.want) || !reflect.DeepEqual(skipped, tt.skipped) {
				t.Fatalf("env %q skipped %q; want %q %q", env, skipped, tt.want, tt.skipped)
			}
		})
	}
}
