{{/* Names. With the release called "gangsched" (the README's `helm install gangsched ...`) every
object has the name manifests/ gives it. */}}
{{- define "gangsched.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "gangsched.fullname" -}}
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

{{- define "gangsched.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Selector labels: the scheduler's pods (Service, PDB, anti-affinity and the Deployment
select them). */}}
{{- define "gangsched.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gangsched.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: scheduler
{{- end }}

{{- define "gangsched.labels" -}}
app.kubernetes.io/name: {{ include "gangsched.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ include "gangsched.chart" . }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "gangsched.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "gangsched.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Lease's namespace: config.leaderElection.leaseNamespace, else the release's. */}}
{{- define "gangsched.leaseNamespace" -}}
{{- $election := .Values.config.leaderElection | default dict }}
{{- default .Release.Namespace $election.leaseNamespace }}
{{- end }}

{{/* The configuration file: values' `config` with the lease namespace filled in. */}}
{{- define "gangsched.config" -}}
{{- $config := deepCopy .Values.config }}
{{- $election := get $config "leaderElection" | default dict }}
{{- $_ := set $election "leaseNamespace" (include "gangsched.leaseNamespace" .) }}
{{- $_ := set $config "leaderElection" $election }}
{{- toYaml $config }}
{{- end }}

{{/* host:port -> port */}}
{{- define "gangsched.port" -}}
{{- regexReplaceAll "^.*:" . "" }}
{{- end }}

{{- define "gangsched.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository $tag }}
{{- end }}
{{- end }}
