import json, sys, torch, random, numpy as np, pandas as pd, time, argparse
sys.path.insert(0,'src'); sys.path.insert(0,'scripts')
from train_coherence import split_sentences, DEFAULT_DATA, make_examples, features
from vistkit.models.coherence_head import build_head
from scipy.stats import spearmanr, pearsonr
ap=argparse.ArgumentParser(); ap.add_argument('--lam',type=float,default=1.0); ap.add_argument('--epochs',type=int,default=30)
ap.add_argument('--cv',type=int,default=0); ap.add_argument('--init',default='none'); ap.add_argument('--hidden',type=int,default=256)
ap.add_argument('--wd',type=float,default=1e-4); ap.add_argument('--lr',type=float,default=1e-3); ap.add_argument('--loss',default='mse'); ap.add_argument('--dw',type=float,default=1.0); ap.add_argument('--extra',default=''); ap.add_argument('--seeds',type=int,default=1)
args=ap.parse_args()
torch.set_num_threads(1); torch.manual_seed(0); rng=random.Random(0)
E=torch.load('emb_all.pt'); emb,pieces=E['emb'],E['pieces']; sid={s:i for i,s in enumerate(E['sentences'])}
D='../shared/data/dhm-visual-storytelling/data'
def stories(ds):
    out=[]
    for s in ['gt_test','llava_vc_p3']:
        st=json.load(open(f'{D}/stories/{ds}/{s}.json'))
        df=pd.read_csv(f'{D}/scores/{ds}/{s}_C.csv',dtype={'story_id':str})
        for i,c in zip(df.story_id,df.C_score):
            ids=[sid[x] for x in split_sentences(st[i])]
            if len(ids)>=2: out.append((s,i,ids,float(c)))
    return out
def pairs(sts):
    ctx,cand,owner=[],[],[]
    for k,(_,_,ids,_) in enumerate(sts):
        for i in range(1,len(ids)): ctx.append(ids[:i]); cand.append(ids[i]); owner.append(k)
    return features(emb,pieces,ctx,cand,'v2'), torch.tensor(owner)
vwp=stories('vwp'); vist=stories('vist')
val=json.load(open(DEFAULT_DATA)); vs=[]; va=[]; album_of=[0]*len(emb)
for a_idx,a in enumerate(sorted(val)):
    for t in val[a]:
        ids=[sid[x] for x in split_sentences(t)]
        for j in ids: album_of[j]=a_idx
        if len(ids)>=2: vs.append(ids); va.append(a_idx)
if args.extra=='vwp':
    for k,t in enumerate(vwp): vs.append(t[2]); va.append(10000+k)
def story_pred(head,X,owner,n):
    p=torch.sigmoid(head(X).squeeze(-1))
    s=torch.zeros(n).index_add(0,owner,p); c=torch.zeros(n).index_add(0,owner,torch.ones_like(p))
    return s/c
def train(train_st):
    X,own=pairs(train_st); y=torch.tensor([t[3] for t in train_st])
    head=build_head(384,args.hidden,'v2')
    if args.init=='shipped':
        from safetensors.torch import load_file
        head.load_state_dict({k:v.float() for k,v in load_file('src/vistkit/resources/models/coherence-minilm-v1/head.safetensors').items()})
    opt=torch.optim.AdamW(head.parameters(),lr=args.lr,weight_decay=args.wd); bce=torch.nn.BCEWithLogitsLoss()
    n=len(train_st)
    for ep in range(args.epochs):
        head.train()
        if args.lam>0:
            ctx,cand,lab,_=make_examples(vs,rng,len(emb),album_of,va,(1.0,0,0,0))
            Xs=features(emb,pieces,ctx,cand,'v2'); ys=torch.tensor(lab,dtype=torch.float32); perm_s=torch.randperm(len(ys))
        perm=torch.randperm(n); nb=max(1,n//32)
        for b in range(nb):
            idx=perm[b::nb]; m=torch.zeros(n,dtype=torch.bool); m[idx]=True
            sel=m[own]; remap=torch.full((n,),-1); remap[idx]=torch.arange(len(idx))
            pred=story_pred(head,X[sel],remap[own[sel]],len(idx))
            loss=args.dw*((pred-y[idx])**2).mean() if args.loss=='mse' else -torch.corrcoef(torch.stack([pred,y[idx]]))[0,1]
            if args.lam>0:
                k=len(perm_s)//nb; j=perm_s[b*k:(b+1)*k]
                loss=loss+args.lam*0.1*bce(head(Xs[j]).squeeze(-1),ys[j])
            opt.zero_grad(); loss.backward(); opt.step()
    return head.eval()
def evaluate(head,sts,name):
    X,own=pairs(sts)
    with torch.no_grad(): p=story_pred(head,X,own,len(sts)).numpy()
    res={}
    for s in ['gt_test','llava_vc_p3',None]:
        idx=[k for k,t in enumerate(sts) if s is None or t[0]==s]; y=np.array([sts[k][3] for k in idx])
        res[s or 'pooled']=(spearmanr(p[idx],y).statistic, pearsonr(p[idx],y).statistic, p[idx].mean(), y.mean(), len(idx))
    for k,v in res.items(): print(f'  {name} {k} n={v[4]} rho={v[0]:.3f} r={v[1]:.3f} mean={v[2]:.3f}/{v[3]:.3f}',flush=True)
    return p
t=time.time()
if args.cv:
    keys=sorted({t[1].split('_')[0] for t in vwp}); random.Random(1).shuffle(keys); fold={k:i%args.cv for i,k in enumerate(keys)}
    P=np.zeros(len(vwp))
    for f in range(args.cv):
        tr=[t for t in vwp if fold[t[1].split('_')[0]]!=f]; te_idx=[k for k,t in enumerate(vwp) if fold[t[1].split('_')[0]]==f]
        h=train(tr); X,own=pairs([vwp[k] for k in te_idx])
        with torch.no_grad(): P[te_idx]=story_pred(h,X,own,len(te_idx)).numpy()
    for s in ['gt_test','llava_vc_p3',None]:
        idx=[k for k,t in enumerate(vwp) if s is None or t[0]==s]; y=np.array([vwp[k][3] for k in idx])
        print(f'  VWP-CV {s or "pooled"} rho={spearmanr(P[idx],y).statistic:.3f} r={pearsonr(P[idx],y).statistic:.3f}')
class Ens(torch.nn.Module):
    def __init__(s,hs): super().__init__(); s.hs=torch.nn.ModuleList(hs)
    def forward(s,x):
        p=torch.stack([torch.sigmoid(h(x)) for h in s.hs]).mean(0); return torch.logit(p.clamp(1e-6,1-1e-6))
hs=[]
for sd in range(args.seeds):
    torch.manual_seed(sd); rng.seed(sd); hs.append(train(vwp))
    if args.seeds>1: evaluate(hs[-1],vist,f'VIST-seed{sd}')
head=Ens(hs).eval(); evaluate(head,vwp,'VWP(train)'); evaluate(head,vist,'VIST')
print('time',time.time()-t)
