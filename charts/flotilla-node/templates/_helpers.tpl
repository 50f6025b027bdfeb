{{/* Chart name, overridable. */}}
{{- define "flotilla-node.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Prefix of every object's name: the release name alone when it already names
the chart, so that `helm install flotilla-node-beijing` does not repeat it.
*/}}
{{- define "flotilla-node.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "flotilla-node.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "flotilla-node.selectorLabels" -}}
app.kubernetes.io/name: {{ include "flotilla-node.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "flotilla-node.labels" -}}
helm.sh/chart: {{ include "flotilla-node.chart" . }}
{{ include "flotilla-node.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: virtual-node
app.kubernetes.io/part-of: flotilla
{{- end }}

{{/* The member cluster's name, checked to be a DNS subdomain. */}}
{{- define "flotilla-node.clusterName" -}}
{{- $name := default .Release.Name .Values.cluster.name }}
{{- if or (gt (len $name) 253) (not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$" $name)) }}
{{- fail (printf "cluster.name %q must be a DNS subdomain: it becomes a node name" $name) }}
{{- end }}
{{- $name }}
{{- end }}

{{- define "flotilla-node.serviceAccountName" -}}
{{- default (include "flotilla-node.fullname" .) .Values.serviceAccount.name }}
{{- end }}

{{/* The release's mode, checked: push, pull or pullHost. */}}
{{- define "flotilla-node.mode" -}}
{{- $mode := default "push" .Values.mode }}
{{- if not (has $mode (list "push" "pull" "pullHost")) }}
{{- fail (printf "mode %q: want push (installed in the host), pull (installed in the member) or pullHost (the host side of a pull release)" $mode) }}
{{- end }}
{{- $mode }}
{{- end }}

{{/* The Secret holding the host kubeconfig (pull mode), and its key. */}}
{{- define "flotilla-node.hostSecretName" -}}
{{- if and .Values.host.kubeconfig .Values.host.existingSecret }}
{{- fail "set host.kubeconfig or host.existingSecret, not both" }}
{{- else if .Values.host.existingSecret }}
{{- .Values.host.existingSecret }}
{{- else if .Values.host.kubeconfig }}
{{- printf "%s-host-kubeconfig" (include "flotilla-node.fullname" .) | trunc 253 }}
{{- else }}
{{- fail "pull mode needs the host cluster's kubeconfig: --set-file host.kubeconfig=<file>, or --set host.existingSecret=<Secret with key kubeconfig>; a pullHost release in the host gives the identity to build it from" }}
{{- end }}
{{- end }}

{{- define "flotilla-node.hostSecretKey" -}}
{{- if .Values.host.existingSecret }}{{ .Values.host.existingSecretKey }}{{ else }}kubeconfig{{ end }}
{{- end }}

{{/*
The ConfigMap and key of the CA that signs the host apiserver's kubelet
client certificate, or nothing for bearer tokens only. In pull mode the
member's kube-root-ca.crt is the wrong CA, so it is refused.
*/}}
{{- define "flotilla-node.clientCA" -}}
{{- $ca := .Values.kubelet.clientCA }}
{{- if $ca.caCert }}
{{- toJson (dict "configMap" (printf "%s-client-ca" (include "flotilla-node.fullname" .)) "key" "ca.crt") }}
{{- else if $ca.configMap }}
{{- if and (eq (include "flotilla-node.mode" .) "pull") (eq $ca.configMap "kube-root-ca.crt") }}
{{- fail "pull mode: kubelet.clientCA must be the host's CA (the one that signs the host apiserver's --kubelet-client-certificate), not the member's kube-root-ca.crt: --set-file kubelet.clientCA.caCert=<host CA>, or --set kubelet.clientCA.configMap=<ConfigMap of yours>" }}
{{- end }}
{{- toJson (dict "configMap" $ca.configMap "key" $ca.key) }}
{{- else }}
{{- toJson dict }}
{{- end }}
{{- end }}

{{/* The Secret holding the member kubeconfig, and its key. */}}
{{- define "flotilla-node.memberSecretName" -}}
{{- if and .Values.member.kubeconfig .Values.member.existingSecret }}
{{- fail "set member.kubeconfig or member.existingSecret, not both" }}
{{- else if .Values.member.existingSecret }}
{{- .Values.member.existingSecret }}
{{- else if .Values.member.kubeconfig }}
{{- printf "%s-member-kubeconfig" (include "flotilla-node.fullname" .) | trunc 253 }}
{{- else }}
{{- fail "the member cluster's kubeconfig is required: --set-file member.kubeconfig=<file>, or --set member.existingSecret=<Secret with key kubeconfig>" }}
{{- end }}
{{- end }}

{{- define "flotilla-node.memberSecretKey" -}}
{{- if .Values.member.existingSecret }}{{ .Values.member.existingSecretKey }}{{ else }}kubeconfig{{ end }}
{{- end }}

{{/*
The NodeConfig file (apiVersion flotilla.io/v1alpha1): the virtualClusters
value as it is, or the whole member as one virtual cluster described by the
node values. flotilla-node defaults and validates it at start-up.
*/}}
{{- define "flotilla-node.nodeConfig" -}}
{{- $vcs := .Values.virtualClusters }}
{{- $node := .Values.node }}
{{- if $vcs }}
{{- if or $node.labels $node.taints $node.region $node.zone $node.provider $node.namespaceMapping }}
{{- fail "node.* describes a whole-cluster virtual node; with virtualClusters set these per virtual cluster" }}
{{- end }}
{{- range $i, $vc := $vcs }}
{{- if not $vc.name }}
{{- fail (printf "virtualClusters[%d].name is required" $i) }}
{{- end }}
{{- end }}
{{- else }}
{{- $vc := dict "name" (include "flotilla-node.clusterName" .) }}
{{- range $key := list "labels" "taints" "region" "zone" "provider" "namespaceMapping" }}
{{- with index $node $key }}{{ $_ := set $vc $key . }}{{ end }}
{{- end }}
{{- $vcs = list $vc }}
{{- end }}
{{- $cfg := dict "apiVersion" "flotilla.io/v1alpha1" "kind" "NodeConfig" "virtualClusters" $vcs }}
{{- with .Values.placement }}{{ $_ := set $cfg "placement" . }}{{ end }}
{{- with .Values.storageClasses }}{{ $_ := set $cfg "storageClasses" . }}{{ end }}
{{- toYaml $cfg }}
{{- end }}

{{/*
The kubelet endpoint ports, as a JSON list: each virtual cluster's
kubeletPort, or kubelet.port counting up, as flotilla-node assigns them.
*/}}
{{- define "flotilla-node.kubeletPorts" -}}
{{- $base := int .Values.kubelet.port }}
{{- $ports := list }}
{{- range $i, $vc := (default (list dict) .Values.virtualClusters) }}
{{- $ports = append $ports (int (default (add $base $i) $vc.kubeletPort)) }}
{{- end }}
{{- toJson $ports }}
{{- end }}
