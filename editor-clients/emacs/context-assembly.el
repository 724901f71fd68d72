;;; context-assembly.el --- Eglot set-up for the Context Assembly Server  -*- lexical-binding: t; -*-

;; Version: 0.1.0
;; Package-Requires: ((emacs "28.1") (eglot "1.9") (jsonrpc "1.0.14"))
;; Keywords: languages, tools

;; This file is not part of GNU Emacs.

;;; Commentary:

;; Connects the `.codebolt/' definition files of a workspace (rule
;; engines, context rules, persistent-memory and ingestion definitions,
;; JSON or YAML) to the Context Assembly Server (`context-assembly
;; serve') through Eglot: diagnostics in Flymake, completion, hover,
;; code actions, symbols, go to definition, references and rename.
;;
;; How only `.codebolt/' files get the server: Eglot chooses a server by
;; major mode, so this package defines two derived major modes,
;; `context-assembly-json-mode' and `context-assembly-yaml-mode', puts
;; them on `auto-mode-alist' for files under a `.codebolt/' directory,
;; and registers them (and only them) in `eglot-server-programs'.  Every
;; other JSON or YAML file keeps its usual mode and server.  The parent
;; of each mode is the best JSON (YAML) mode available when this file is
;; loaded: `json-mode', `json-ts-mode' (when its grammar is installed),
;; `js-json-mode', then `js-mode'; `yaml-mode', `yaml-ts-mode', then
;; `text-mode'.  So indentation, font-lock and key bindings stay those of
;; the JSON (YAML) mode you already use.
;;
;; The workspace root sent to the server is the directory that holds
;; `.codebolt/' (a project function, consulted only for Eglot and only
;; in these two modes), so a `.codebolt/' in a sub-folder of a larger
;; repository gets its own server.
;;
;; Settings (`context-assembly-settings') are answered to the server's
;; `workspace/configuration' requests for the section `contextAssembly',
;; on top of whatever `eglot-workspace-configuration' already says.
;;
;; Commands: `context-assembly-evaluate-rules' sends an assembly request
;; (a JSON file, or the current buffer with \\[universal-argument]) to
;; `contextAssembly/evaluateRules' and shows which memories the rules
;; select, with the per-condition explanation.

;;; Code:

(require 'cl-lib)
(require 'subr-x)
(require 'jsonrpc)
(require 'eglot)

(defgroup context-assembly nil
  "Eglot set-up for the Context Assembly Server."
  :group 'eglot
  :prefix "context-assembly-")

(defcustom context-assembly-server-command '("context-assembly" "serve")
  "The command that starts the server speaking LSP on stdio.
A list (PROGRAM ARGS...), for example
  (\"context-assembly\" \"serve\")
  (\"python3\" \"-m\" \"context_assembly\" \"serve\")
  (\"/path/to/.venv/bin/context-assembly\" \"serve\")
It is read each time a server starts."
  :type '(repeat string))

(defconst context-assembly-modes '(context-assembly-json-mode context-assembly-yaml-mode)
  "The major modes whose buffers the Context Assembly Server manages.")

(defun context-assembly--server-p (server)
  "Non-nil when SERVER is an Eglot server for `context-assembly-modes'."
  (and server
       (cl-intersection (ignore-errors (eglot--major-modes server))
                        context-assembly-modes)))

(defun context-assembly--our-servers ()
  "Every live Eglot server started by this package."
  (when (boundp 'eglot--servers-by-project)
    (let (servers)
      (maphash (lambda (_project list)
                 (dolist (server list)
                   (when (and (context-assembly--server-p server)
                              (jsonrpc-running-p server))
                     (cl-pushnew server servers))))
               eglot--servers-by-project)
      (nreverse servers))))

(defcustom context-assembly-settings nil
  "Settings sent to the server as workspace configuration `contextAssembly'.
A plist with keyword keys, as in `.codebolt/context-assembly.json'
and SPEC section 9, for example
  (:max_tokens 8000 :pipeline_timeout_ms 10000 :snapshots :json-false)
Use `:json-false' for JSON false, t for true and a vector for an
array.  These settings override the workspace's
`.codebolt/context-assembly.json'; keys the server's schema refuses
are dropped one by one.  Changing this option through Customize (or
`setopt') tells running servers at once."
  :type '(plist :key-type keyword :value-type sexp)
  :set (lambda (symbol value)
         (set-default symbol value)
         (when (fboundp 'eglot-signal-didChangeConfiguration)
           (dolist (server (context-assembly--our-servers))
             (ignore-errors (eglot-signal-didChangeConfiguration server))))))

(defcustom context-assembly-auto-start t
  "Non-nil means start Eglot (`eglot-ensure') when a `.codebolt/' file is opened."
  :type 'boolean)

(defcustom context-assembly-result-buffer "*Context Assembly*"
  "Name of the buffer that shows results of `context-assembly-evaluate-rules'."
  :type 'string)

;;;; Workspace and modes

(defun context-assembly-workspace-root (&optional directory)
  "The workspace directory holding the `.codebolt/' that DIRECTORY is in.
DIRECTORY defaults to `default-directory'.  Nil when DIRECTORY is
not under a `.codebolt/' directory."
  (when-let* ((dir (expand-file-name (or directory default-directory)))
              (codebolt (locate-dominating-file
                         dir
                         (lambda (d)
                           (equal (file-name-nondirectory (directory-file-name d))
                                  ".codebolt")))))
    (file-name-directory (directory-file-name (expand-file-name codebolt)))))

(defun context-assembly--first-available (candidates fallback)
  "The first mode of CANDIDATES that can be used, else FALLBACK.
Each candidate is a mode symbol or (MODE . TREESIT-LANGUAGE)."
  (or (cl-loop for candidate in candidates
               for mode = (if (consp candidate) (car candidate) candidate)
               for language = (and (consp candidate) (cdr candidate))
               when (and (fboundp mode)
                         (or (null language)
                             (and (fboundp 'treesit-ready-p)
                                  (funcall 'treesit-ready-p language t))))
               return mode)
      fallback))

(defalias 'context-assembly--json-parent-mode
  (context-assembly--first-available
   '(json-mode (json-ts-mode . json) js-json-mode) 'js-mode)
  "The JSON major mode `context-assembly-json-mode' derives from.")

(defalias 'context-assembly--yaml-parent-mode
  (context-assembly--first-available
   '(yaml-mode (yaml-ts-mode . yaml)) 'text-mode)
  "The YAML major mode `context-assembly-yaml-mode' derives from.")

;;;###autoload
(define-derived-mode context-assembly-json-mode context-assembly--json-parent-mode
  "CA-JSON"
  "Major mode for JSON definition files under `.codebolt/'.
Derived from the best JSON mode available; managed by Eglot with
the Context Assembly Server (see `context-assembly-server-command').")

;;;###autoload
(define-derived-mode context-assembly-yaml-mode context-assembly--yaml-parent-mode
  "CA-YAML"
  "Major mode for YAML definition files under `.codebolt/'.
Derived from the best YAML mode available; managed by Eglot with
the Context Assembly Server (see `context-assembly-server-command')."
  (setq-local indent-tabs-mode nil))

;;;###autoload
(add-to-list 'auto-mode-alist '("/\\.codebolt/.*\\.json\\'" . context-assembly-json-mode))
;;;###autoload
(add-to-list 'auto-mode-alist '("/\\.codebolt/.*\\.ya?ml\\'" . context-assembly-yaml-mode))

(defun context-assembly--project (directory)
  "For Eglot only: the `.codebolt/' workspace of DIRECTORY as a project.
Consulted in `context-assembly-modes' buffers while Eglot looks for
a project (`eglot-lsp-context'), so the server's root is the
directory that holds `.codebolt/'."
  (when (and (bound-and-true-p eglot-lsp-context)
             (memq major-mode context-assembly-modes))
    ;; From the buffer's own file where there is one: while Eglot connects it asks again with
    ;; DIRECTORY set to the project root it found, from which `.codebolt/' is not found inside a
    ;; git repository, and the version-control project would win (the first file got no didOpen).
    (when-let ((root (context-assembly-workspace-root
                      (or (and buffer-file-name (file-name-directory buffer-file-name)) directory))))
      (cons 'transient root))))

(add-hook 'project-find-functions #'context-assembly--project)

;;;; Eglot

(defun context-assembly--contact (&rest _)
  "The Eglot contact: `context-assembly-server-command'."
  (copy-sequence context-assembly-server-command))

(add-to-list 'eglot-server-programs
             '(((context-assembly-json-mode :language-id "json")
                (context-assembly-yaml-mode :language-id "yaml"))
               . context-assembly--contact))

(defvar context-assembly--previous-workspace-configuration nil
  "The default `eglot-workspace-configuration' before this package wrapped it.")

(defun context-assembly--as-plist (value)
  "VALUE, a workspace configuration plist or alist, as a plist."
  (if (and (consp value) (consp (car value)))
      (cl-loop for (section . v) in value
               collect (if (keywordp section) section (intern (format ":%s" section)))
               collect v)
    value))

(defun context-assembly--workspace-configuration (server &rest args)
  "Workspace configuration for SERVER: `contextAssembly' for ours.
Other servers (and other sections) get what the previous default of
`eglot-workspace-configuration' says.  ARGS are passed on to a
previous function value."
  (let* ((previous context-assembly--previous-workspace-configuration)
         (base (context-assembly--as-plist
                (if (functionp previous) (apply previous server args) previous))))
    (if (context-assembly--server-p server)
        (append (list :contextAssembly (or context-assembly-settings
                                           (make-hash-table :test #'equal)))
                (cl-loop for (key value) on base by #'cddr
                         unless (eq key :contextAssembly) append (list key value)))
      base)))

(unless (eq (default-value 'eglot-workspace-configuration)
            #'context-assembly--workspace-configuration)
  (setq context-assembly--previous-workspace-configuration
        (default-value 'eglot-workspace-configuration))
  (setq-default eglot-workspace-configuration #'context-assembly--workspace-configuration))

(defun context-assembly--maybe-start ()
  "Start Eglot in this buffer if `context-assembly-auto-start' is non-nil."
  (when (and context-assembly-auto-start buffer-file-name)
    (eglot-ensure)))

(add-hook 'context-assembly-json-mode-hook #'context-assembly--maybe-start)
(add-hook 'context-assembly-yaml-mode-hook #'context-assembly--maybe-start)

;;;; Commands

(defun context-assembly-server (&optional noerror)
  "The Context Assembly server for the current buffer.
The buffer's own Eglot server when it is ours, else the running
server whose workspace contains the buffer's directory, else the
only running one.  Signal an error unless NOERROR."
  (or (let ((server (ignore-errors (eglot-current-server))))
        (and (context-assembly--server-p server) server))
      (let ((servers (context-assembly--our-servers))
            (here (expand-file-name default-directory)))
        (or (cl-find-if (lambda (server)
                          (when-let ((root (ignore-errors
                                             (project-root (eglot--project server)))))
                            (string-prefix-p (expand-file-name root) here)))
                        servers)
            (and (= (length servers) 1) (car servers))))
      (unless noerror
        (user-error "No Context Assembly server: open a file under .codebolt/ (M-x eglot)"))))

(defun context-assembly--parse-json ()
  "Parse the JSON at point in the form `jsonrpc-request' sends back unchanged.
Objects become hash tables (so `{}' stays an object and keys such as
\"scope.agent.agent_name\" are kept exactly), null becomes nil and
false `:json-false', as jsonrpc encodes them."
  (if (fboundp 'json-parse-buffer)
      (json-parse-buffer :object-type 'hash-table :array-type 'array
                         :null-object nil :false-object :json-false)
    (require 'json)
    (defvar json-object-type) (defvar json-array-type) (defvar json-key-type)
    (defvar json-false) (defvar json-null)
    (let ((json-object-type 'hash-table) (json-array-type 'vector)
          (json-key-type 'string) (json-false :json-false) (json-null nil))
      (json-read))))

(defun context-assembly-read-request (source)
  "Read an assembly request from SOURCE, a buffer or a file name."
  (with-temp-buffer
    (if (bufferp source)
        (insert-buffer-substring source)
      (insert-file-contents (expand-file-name source)))
    (goto-char (point-min))
    (let ((request (condition-case err (context-assembly--parse-json)
                     (error (user-error "Not a JSON assembly request (%s): %s"
                                        (if (bufferp source) (buffer-name source) source)
                                        (error-message-string err))))))
      (unless (hash-table-p request)
        (user-error "An assembly request is a JSON object"))
      request)))

(defun context-assembly--default-request-file ()
  "A request.json at the root of the current workspace, or nil."
  (let* ((server (context-assembly-server t))
         (root (or (context-assembly-workspace-root)
                   (and server (ignore-errors (project-root (eglot--project server))))))
         (file (and root (expand-file-name "request.json" root))))
    (and file (file-exists-p file) file)))

(defun context-assembly--show (result title)
  "Show RESULT (a plist from the server) as pretty JSON under TITLE."
  (with-current-buffer (get-buffer-create context-assembly-result-buffer)
    (let ((inhibit-read-only t))
      (erase-buffer)
      (require 'json)
      (insert (json-encode result))
      (json-pretty-print-buffer)
      (goto-char (point-min))
      (if (fboundp 'js-json-mode) (funcall 'js-json-mode) (js-mode))
      (setq header-line-format title)
      (view-mode 1))
    (display-buffer (current-buffer))))

;;;###autoload
(defun context-assembly-evaluate-rules (source &optional server)
  "Evaluate the workspace's rules against the assembly request in SOURCE.
SOURCE is a JSON file name or a buffer; interactively a file is
read (default: request.json at the workspace root), and with
\\[universal-argument] the current buffer is the request.  Sends
`contextAssembly/evaluateRules' to SERVER (default: the Context
Assembly server of the current buffer, see `context-assembly-server'),
shows the result (matched and excluded memories, per-rule and
per-condition results, variables used and missing) in
`context-assembly-result-buffer' and returns it as a plist."
  (interactive
   (list (if current-prefix-arg
             (current-buffer)
           (let ((default (context-assembly--default-request-file)))
             (read-file-name "Assembly request (JSON): "
                             (and default (file-name-directory default))
                             default t
                             (and default (file-name-nondirectory default)))))))
  (let* ((server (or server (context-assembly-server)))
         (request (context-assembly-read-request source))
         (result (jsonrpc-request server :contextAssembly/evaluateRules request)))
    (when (called-interactively-p 'interactive)
      (context-assembly--show result "contextAssembly/evaluateRules")
      (message "Matched: %s; excluded: %s"
               (mapconcat #'identity (plist-get result :matched_memories) ", ")
               (mapconcat #'identity (plist-get result :excluded_memories) ", ")))
    result))

(provide 'context-assembly)
;;; context-assembly.el ends here
