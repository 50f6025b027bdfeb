{{/* Chart name, overridable. */}}
{{- define "flotilla-policy.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Prefix of every object's name: the release name alone when it already names
the chart.
*/}}
{{- define "flotilla-policy.fullname" -}}
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

{{- define "flotilla-policy.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "flotilla-policy.selectorLabels" -}}
app.kubernetes.io/name: {{ include "flotilla-policy.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "flotilla-policy.labels" -}}
helm.sh/chart: {{ include "flotilla-policy.chart" . }}
{{ include "flotilla-policy.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: policy-controller
app.kubernetes.io/part-of: flotilla
{{- end }}

{{- define "flotilla-policy.serviceAccountName" -}}
{{- default (include "flotilla-policy.fullname" .) .Values.serviceAccount.name }}
{{- end }}

{{- define "flotilla-policy.serviceName" -}}
{{- printf "%s-webhook" (include "flotilla-policy.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
A name flotilla-policy's roles grant by resourceNames, read from their
generated copies so that the chart and config/rbac cannot disagree: the
first resourceName of the rule for the resource given.
*/}}
{{- define "flotilla-policy.grantedName" -}}
{{- $file := index . 0 }}
{{- $resource := index . 1 }}
{{- $found := "" }}
{{- range (get (fromYaml $file) "rules") }}
{{- if and (not $found) .resourceNames (has $resource .resources) }}
{{- $found = first .resourceNames }}
{{- end }}
{{- end }}
{{- required (printf "no rule grants %s by name; run hack/update-charts.sh" $resource) $found }}
{{- end }}

{{/* The webhook configurations' name, which the ClusterRole grants. */}}
{{- define "flotilla-policy.webhookName" -}}
{{- include "flotilla-policy.grantedName" (list (.Files.Get "files/policy-clusterrole.yaml") "mutatingwebhookconfigurations") }}
{{- end }}

{{/* The Secret of self-managed certificates, which the Role grants. */}}
{{- define "flotilla-policy.certSecretName" -}}
{{- include "flotilla-policy.grantedName" (list (.Files.Get "files/policy-role.yaml") "secrets") }}
{{- end }}

{{/* The Secret cert-manager writes the serving certificate to. */}}
{{- define "flotilla-policy.certManagerSecretName" -}}
{{- printf "%s-webhook-tls" (include "flotilla-policy.fullname" .) }}
{{- end }}
